-- Each item's own data key, wrapped under its subject's key (crypto.py). Every version of
-- the item is sealed with it; deleting the row destroys the item's content alone (erase,
-- retention), and forgetting the subject deletes all of the subject's rows with its key.
-- Items written before this migration have no row: their content stays sealed under the
-- subject key, and only forgetting the subject destroys it.
CREATE TABLE item_keys (
    tenant_id  TEXT NOT NULL,
    memory_id  TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    key_id     BLOB NOT NULL,
    wrapped    BLOB NOT NULL,
    PRIMARY KEY (tenant_id, memory_id)
) WITHOUT ROWID;
CREATE INDEX item_keys_by_subject ON item_keys (tenant_id, subject_id);

-- Browsing a tenant's items in (updated_at, id) order (GET /v1/memories).
CREATE INDEX memories_browse ON memories (tenant_id, updated_at, id);

-- The retention sweep: items that still hold content in a status with a window.
CREATE INDEX memories_retention ON memories (updated_at, tenant_id, id)
    WHERE content IS NOT NULL AND status IN ('expired', 'rejected', 'superseded');

-- A deleted item no longer tells its content's length by its token count (the projection
-- now folds forget to tokens 0; this keeps replay --verify clean for earlier forgets).
UPDATE memories SET tokens = 0 WHERE status = 'deleted';
