-- Facts about the store itself, one value per name: the master-key check value, the
-- analyzer the search index was built with, a purge still due. Written once or replaced
-- whole; never content.
CREATE TABLE store_meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
