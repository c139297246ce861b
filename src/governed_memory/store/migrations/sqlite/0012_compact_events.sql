-- The compact form of memory.written events (issue 16): the sealed content as a raw blob
-- instead of base64 inside the JSON payload, its content hash as 32 bytes instead of hex
-- (text when it is not the hex of a SHA-256), and a payload of the remaining values without
-- their keys, the subject id left to its column (governed_memory/codec.py: stored_columns).
-- Events stored before keep the canonical form and NULL here; both forms read alike, and
-- the hash chain digests the canonical form of either (codec.canonical_payload), so every
-- hash stored before or after stays valid. PostgreSQL keeps the canonical form.
-- An item whose content its compact event holds keeps the empty blob in its row's place
-- (store/sqlite/sql.py: ITEM_CONTENT), so the sealed content is stored once.
ALTER TABLE events ADD COLUMN content BLOB;
ALTER TABLE events ADD COLUMN content_hash BLOB;

-- The append-only trigger of migration 8, now also refusing a change of the new columns
-- when an unchained event's chain is set.
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
        AND NEW.content IS OLD.content AND NEW.content_hash IS OLD.content_hash
    )
BEGIN
    SELECT RAISE(ABORT, 'the event log is append-only: UPDATE refused');
END;
