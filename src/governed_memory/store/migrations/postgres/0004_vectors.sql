-- Semantic recall (optional, off by default): the vector of each searchable item, sealed
-- under its subject's key exactly like its content (mirrors
-- migrations/sqlite/0004_vectors.sql). Written and removed with the item's postings.
CREATE TABLE search_vectors (
    item   BIGINT PRIMARY KEY,  -- memories.rowid
    scope  BIGINT NOT NULL,
    vector BYTEA  NOT NULL
);
CREATE INDEX search_vectors_by_scope ON search_vectors (scope);
