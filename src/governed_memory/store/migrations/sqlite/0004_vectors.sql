-- Semantic recall (optional, off by default): the vector of each searchable item, sealed
-- under its subject's key exactly like its content (a vector is content, SPEC §6.2).
-- Derived data like the postings: written and removed with them, so an item's vector
-- leaves this table when the item leaves `active`, and a forget destroys the key that
-- sealed it.
CREATE TABLE search_vectors (
    item   INTEGER PRIMARY KEY,  -- memories.rowid
    scope  INTEGER NOT NULL,
    vector BLOB    NOT NULL
);
CREATE INDEX search_vectors_by_scope ON search_vectors (scope);
