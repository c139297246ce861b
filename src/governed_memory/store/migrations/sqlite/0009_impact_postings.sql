-- The search index, second form (issue 16): postings ordered by impact, and each item's
-- own facts once, in its document (mirrors migrations/postgres/0009_impact_postings.sql).
--
-- A posting is (scope, term, impact, item): its impact is tf << 16 | (65535 - length)
-- (store/sqlite/impact.py), so within a term the primary key lists the postings best
-- first -- a larger tf first, then a shorter item -- and a search reads the best of a
-- long list through the key instead of scoring and sorting all of it. tf and length are
-- both recovered from the impact (content is at most 8,000 characters, so both fit).
--
-- A document now holds what ranking needs of its item (confidence, last change, expiry,
-- kind) and its terms' frequencies beside its terms, so a posting needs nothing else, a
-- search scores an item from one row, and a rebuild rewrites postings without opening
-- content. Both stay derived data: deleted with the item's postings when it leaves
-- `active`, holding keyed term hashes and counts only.
CREATE TABLE search_docs_0009 (
    item       INTEGER PRIMARY KEY,  -- memories.rowid
    scope      INTEGER NOT NULL,
    length     INTEGER NOT NULL,
    confidence REAL    NOT NULL,
    updated_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    terms      BLOB    NOT NULL,     -- the term ids, 64-bit each
    tfs        BLOB    NOT NULL      -- their frequencies, 16-bit each, in the same order
);
-- The frequencies are packed by the store in the same transaction (store/sqlite/impact.py:
-- fill_documents); until then each document's are empty.
INSERT INTO search_docs_0009 (item, scope, length, confidence, updated_at, expires_at, kind,
                              terms, tfs)
    SELECT d.item, d.scope, d.length, m.confidence, m.updated_at, m.expires_at, m.kind,
           X'', X''
    FROM search_docs AS d JOIN memories AS m ON m.rowid = d.item;

CREATE TABLE postings_0009 (
    scope  INTEGER NOT NULL,
    term   INTEGER NOT NULL,
    impact INTEGER NOT NULL,
    item   INTEGER NOT NULL,
    PRIMARY KEY (scope, term, impact, item)
) WITHOUT ROWID;
INSERT INTO postings_0009 (scope, term, impact, item)
    SELECT scope, term, (tf << 16) | (65535 - length), item FROM postings;
