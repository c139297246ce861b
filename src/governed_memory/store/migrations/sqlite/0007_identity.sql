-- Identity (SPEC §5): every API key belongs to a named principal, may expire, and records
-- when it was last used; idempotency records belong to the credential that made them.
-- Both tables are rebuilt, as SQLite cannot change a primary key or add a NOT NULL column
-- without a default (mirrors migrations/postgres/0007_identity.sql).

-- Keys made before principals existed belong to key:<key id>, the actor their events
-- already name, so four eyes keep comparing exactly what they compared before.
CREATE TABLE api_keys_0007 (
    key_id       TEXT    PRIMARY KEY,
    tenant_id    TEXT    NOT NULL,
    name         TEXT,
    agents       TEXT,
    scopes       TEXT    NOT NULL,
    max_trust    TEXT    NOT NULL,
    secret_hash  TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER,
    principal_id TEXT    NOT NULL,
    expires_at   INTEGER,
    last_used_at INTEGER
);
INSERT INTO api_keys_0007 (key_id, tenant_id, name, agents, scopes, max_trust, secret_hash,
                           created_at, revoked_at, principal_id)
    SELECT key_id, tenant_id, name, agents, scopes, max_trust, secret_hash, created_at,
           revoked_at, 'key:' || key_id
    FROM api_keys;
DROP TABLE api_keys;
ALTER TABLE api_keys_0007 RENAME TO api_keys;
CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id, created_at);

-- A record's credential is the actor of the event at its position: until now every actor
-- was the credential (key:<key id> over HTTP, the principal id of a library caller).
-- A record without a position (a forget that changed nothing) gets the owner 'legacy:',
-- which is no API key's credential: such a retry runs again, and changes nothing again.
CREATE TABLE idempotency_0007 (
    tenant_id   TEXT    NOT NULL,
    credential  TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL,
    result      TEXT    NOT NULL,
    position    INTEGER,
    PRIMARY KEY (tenant_id, credential, key)
) WITHOUT ROWID;
INSERT INTO idempotency_0007 (tenant_id, credential, key, fingerprint, result, position)
    SELECT i.tenant_id,
           coalesce((SELECT e.actor FROM events AS e WHERE e.position = i.position), 'legacy:'),
           i.key, i.fingerprint, i.result, i.position
    FROM idempotency AS i;
DROP TABLE idempotency;
ALTER TABLE idempotency_0007 RENAME TO idempotency;
