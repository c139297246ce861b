-- The append-only log: positions are assigned in commit order (one writer at a time).
CREATE TABLE events (
    position        INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        TEXT    NOT NULL UNIQUE,
    type            TEXT    NOT NULL,
    tenant_id       TEXT    NOT NULL,
    memory_id       TEXT,
    subject_id      TEXT,
    version         INTEGER,
    occurred_at     INTEGER NOT NULL,
    actor           TEXT    NOT NULL,
    idempotency_key TEXT,
    schema_version  INTEGER NOT NULL,
    payload         TEXT    NOT NULL
);
CREATE INDEX events_by_tenant ON events (tenant_id, position);
CREATE INDEX events_by_memory ON events (tenant_id, memory_id, position);
CREATE INDEX events_forgets ON events (tenant_id, subject_id, position)
    WHERE type = 'subject.forgotten';

CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'the event log is append-only: UPDATE refused');
END;
CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'the event log is append-only: DELETE refused');
END;

-- The projection: one row per item, content sealed.
CREATE TABLE memories (
    rowid           INTEGER PRIMARY KEY,
    tenant_id       TEXT    NOT NULL,
    id              TEXT    NOT NULL,
    agent_id        TEXT    NOT NULL,
    subject_id      TEXT    NOT NULL,
    purpose         TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    content         BLOB,
    content_version INTEGER NOT NULL,
    content_hash    TEXT    NOT NULL,
    provenance      TEXT    NOT NULL,
    trust           TEXT    NOT NULL,
    confidence      REAL    NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    version         INTEGER NOT NULL CHECK (version >= 1),
    status          TEXT    NOT NULL,
    supersedes_id   TEXT,
    superseded_by   TEXT,
    written_by      TEXT    NOT NULL,
    tokens          INTEGER NOT NULL,
    UNIQUE (tenant_id, id)
);
CREATE INDEX memories_by_subject ON memories (tenant_id, subject_id);
CREATE INDEX memories_due ON memories (expires_at) WHERE status IN ('active', 'quarantined');
CREATE INDEX memories_quarantine ON memories (tenant_id, updated_at, id)
    WHERE status = 'quarantined';

-- Search: one scope per (tenant, agent, purpose), postings of active items only.
-- Terms are keyed 64-bit hashes; these rows are derived data, purged on forget.
CREATE TABLE scopes (
    id           INTEGER PRIMARY KEY,
    tenant_id    TEXT    NOT NULL,
    agent_id     TEXT    NOT NULL,
    purpose      TEXT    NOT NULL,
    documents    INTEGER NOT NULL DEFAULT 0,
    total_length INTEGER NOT NULL DEFAULT 0,
    generation   INTEGER NOT NULL DEFAULT 0,  -- +1 on every change of the scope's postings
    UNIQUE (tenant_id, agent_id, purpose)
);
CREATE TABLE search_docs (
    item   INTEGER PRIMARY KEY,
    scope  INTEGER NOT NULL,
    length INTEGER NOT NULL,
    terms  BLOB    NOT NULL
);
-- Each posting carries the item's length, confidence, last change, expiry and kind so a
-- search can filter, bound and order an item's score from the posting alone (postings
-- are rewritten whenever their item changes, so these copies are never stale).
CREATE TABLE postings (
    scope      INTEGER NOT NULL,
    term       INTEGER NOT NULL,
    item       INTEGER NOT NULL,
    tf         INTEGER NOT NULL,
    length     INTEGER NOT NULL,
    confidence REAL    NOT NULL,
    updated_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    PRIMARY KEY (scope, term, item)
) WITHOUT ROWID;

CREATE TABLE idempotency (
    tenant_id   TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL,
    result      TEXT    NOT NULL,
    position    INTEGER,
    PRIMARY KEY (tenant_id, key)
) WITHOUT ROWID;

CREATE TABLE subject_keys (
    tenant_id  TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    key_id     BLOB NOT NULL,
    wrapped    BLOB NOT NULL,
    PRIMARY KEY (tenant_id, subject_id)
) WITHOUT ROWID;
