-- The tamper-evident log (issue 13): every event carries the hash of its tenant's previous
-- event and its own (see governed_memory/chain.py). The store fills both for the events
-- already stored in the transaction of this migration (store/chain_links.py: fill), so
-- the append-only trigger lets exactly that through: setting the chain of an event that
-- has none. Any other change of an event is still refused
-- (mirrors migrations/postgres/0008_event_chain.sql).
ALTER TABLE events ADD COLUMN prev_hash BLOB;
ALTER TABLE events ADD COLUMN hash BLOB;

DROP TRIGGER events_refuse_update;
CREATE TRIGGER events_refuse_update BEFORE UPDATE OF
    position, event_id, type, tenant_id, memory_id, subject_id, version, occurred_at, actor,
    idempotency_key, schema_version, payload ON events
BEGIN
    SELECT RAISE(ABORT, 'the event log is append-only: UPDATE refused');
END;
CREATE TRIGGER events_refuse_rechain BEFORE UPDATE OF prev_hash, hash ON events
    WHEN OLD.hash IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'the event log is append-only: UPDATE refused');
END;
