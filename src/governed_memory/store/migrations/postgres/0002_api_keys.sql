-- API keys: the secret is never stored, only its SHA-256.
CREATE TABLE api_keys (
    key_id      TEXT   COLLATE "C" PRIMARY KEY,
    tenant_id   TEXT   COLLATE "C" NOT NULL,
    name        TEXT   COLLATE "C",
    agents      TEXT   COLLATE "C",
    scopes      TEXT   COLLATE "C" NOT NULL,
    max_trust   TEXT   COLLATE "C" NOT NULL,
    secret_hash TEXT   COLLATE "C" NOT NULL,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id, created_at);
