-- Each item's own data key, wrapped under its subject's key (mirrors
-- migrations/sqlite/0006_item_keys.sql, which says why).
CREATE TABLE item_keys (
    tenant_id  TEXT  COLLATE "C" NOT NULL,
    memory_id  TEXT  COLLATE "C" NOT NULL,
    subject_id TEXT  COLLATE "C" NOT NULL,
    key_id     BYTEA NOT NULL,
    wrapped    BYTEA NOT NULL,
    PRIMARY KEY (tenant_id, memory_id)
);
CREATE INDEX item_keys_by_subject ON item_keys (tenant_id, subject_id);

CREATE INDEX memories_browse ON memories (tenant_id, updated_at, id);

CREATE INDEX memories_retention ON memories (updated_at, tenant_id, id)
    WHERE content IS NOT NULL AND status IN ('expired', 'rejected', 'superseded');

UPDATE memories SET tokens = 0 WHERE status = 'deleted';
