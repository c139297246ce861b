-- Facts about the store itself, one value per name: the master-key check value, the
-- analyzer the search index was built with, a purge still due. Written once or replaced
-- whole; never content (mirrors migrations/sqlite/0003_store_meta.sql).
CREATE TABLE store_meta (
    name  TEXT COLLATE "C" PRIMARY KEY,
    value TEXT COLLATE "C" NOT NULL
);
