-- API keys: the secret is never stored, only its SHA-256.
CREATE TABLE api_keys (
    key_id      TEXT    PRIMARY KEY,
    tenant_id   TEXT    NOT NULL,
    name        TEXT,
    agents      TEXT,
    scopes      TEXT    NOT NULL,
    max_trust   TEXT    NOT NULL,
    secret_hash TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id, created_at);
