-- The tamper-evident log (issue 13): every event carries the hash of its tenant's previous
-- event and its own (see governed_memory/chain.py). The store fills both for the events
-- already stored in the transaction of this migration (store/chain_links.py: fill), so
-- the append-only trigger lets exactly that through: setting the chain of an event that
-- has none. Any other change of an event is still refused
-- (mirrors migrations/postgres/0008_event_chain.sql).
ALTER TABLE events ADD COLUMN prev_hash BLOB;
ALTER TABLE events ADD COLUMN hash BLOB;

-- One trigger on every UPDATE (not "UPDATE OF <columns>", which an update of the rowid
-- alias would pass): only setting both hashes of an unchained event, every other column
-- and the rowid unchanged, goes through.
DROP TRIGGER events_refuse_update;
CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
    WHEN NOT (
        OLD.hash IS NULL AND OLD.prev_hash IS NULL
        AND NEW.rowid IS OLD.rowid AND NEW.position IS OLD.position
        AND NEW.event_id IS OLD.event_id AND NEW.type IS OLD.type
        AND NEW.tenant_id IS OLD.tenant_id AND NEW.memory_id IS OLD.memory_id
        AND NEW.subject_id IS OLD.subject_id AND NEW.version IS OLD.version
        AND NEW.occurred_at IS OLD.occurred_at AND NEW.actor IS OLD.actor
        AND NEW.idempotency_key IS OLD.idempotency_key
        AND NEW.schema_version IS OLD.schema_version AND NEW.payload IS OLD.payload
    )
BEGIN
    SELECT RAISE(ABORT, 'the event log is append-only: UPDATE refused');
END;
