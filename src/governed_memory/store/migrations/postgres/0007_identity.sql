-- Identity (SPEC §5): every API key belongs to a named principal, may expire, and records
-- when it was last used; idempotency records belong to the credential that made them
-- (mirrors migrations/sqlite/0007_identity.sql).

-- Keys made before principals existed belong to key:<key id>, the actor their events
-- already name, so four eyes keep comparing exactly what they compared before.
ALTER TABLE api_keys ADD COLUMN principal_id TEXT COLLATE "C";
UPDATE api_keys SET principal_id = 'key:' || key_id;
ALTER TABLE api_keys ALTER COLUMN principal_id SET NOT NULL;
ALTER TABLE api_keys ADD COLUMN expires_at BIGINT;
ALTER TABLE api_keys ADD COLUMN last_used_at BIGINT;

-- A record's credential is the actor of the event at its position: until now every actor
-- was the credential (key:<key id> over HTTP, the principal id of a library caller).
-- A record without a position (a forget that changed nothing) gets the owner 'legacy:',
-- which is no API key's credential: such a retry runs again, and changes nothing again.
ALTER TABLE idempotency ADD COLUMN credential TEXT COLLATE "C";
UPDATE idempotency AS i SET credential = coalesce(
    (SELECT e.actor FROM events AS e WHERE e.position = i.position), 'legacy:');
ALTER TABLE idempotency ALTER COLUMN credential SET NOT NULL;
ALTER TABLE idempotency DROP CONSTRAINT idempotency_pkey;
ALTER TABLE idempotency ADD CONSTRAINT idempotency_pkey PRIMARY KEY (tenant_id, credential, key);
