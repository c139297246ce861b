-- The review console's sessions (http/console/sessions.py), in the store so that every
-- worker of `gmem serve --workers N` and every instance on the database shares them.
-- digest: SHA-256 of the id the cookie carries (never the id); key_check: a hash of the
-- key's stored secret hash at sign-in (never the secret); times in microseconds.
-- Sessions idle past the timeout are deleted at each sign-in, by last_seen.
CREATE TABLE console_sessions (
    digest     TEXT    NOT NULL PRIMARY KEY,
    key_id     TEXT    NOT NULL,
    key_check  TEXT    NOT NULL,
    started_at INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX console_sessions_by_last_seen ON console_sessions (last_seen);
