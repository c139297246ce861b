-- The tamper-evident log (issue 13): every event carries the hash of its tenant's previous
-- event and its own (see governed_memory/chain.py). The store fills both for the events
-- already stored in the transaction of this migration (store/chain_links.py: fill), so
-- the append-only trigger lets exactly that through: setting the chain of an event that
-- has none, every other column unchanged. Any other change of an event is still refused
-- (mirrors migrations/sqlite/0008_event_chain.sql).
ALTER TABLE events ADD COLUMN prev_hash BYTEA, ADD COLUMN hash BYTEA;

CREATE OR REPLACE FUNCTION events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF OLD.hash IS NULL
           AND (to_jsonb(NEW) - 'prev_hash' - 'hash') = (to_jsonb(OLD) - 'prev_hash' - 'hash')
        THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'the event log is append-only: % refused', TG_OP;
END;
$$;
