-- The review console's sessions (mirrors migrations/sqlite/0011_console_sessions.sql,
-- which says why).
CREATE TABLE console_sessions (
    digest     TEXT   COLLATE "C" NOT NULL PRIMARY KEY,
    key_id     TEXT   COLLATE "C" NOT NULL,
    key_check  TEXT   COLLATE "C" NOT NULL,
    started_at BIGINT NOT NULL,
    last_seen  BIGINT NOT NULL
);
CREATE INDEX console_sessions_by_last_seen ON console_sessions (last_seen);
