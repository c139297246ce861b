-- The search index, second form (issue 16): postings ordered by impact, and each item's
-- own facts once, in its document (mirrors migrations/sqlite/0009_impact_postings.sql
-- and 0010_impact_postings_swap.sql; store/impact.py defines the impact).
--
-- A posting is (scope, term, impact, item) with impact = tf << 16 | (65535 - length), so
-- a term's postings are listed best first by the primary key, and tf and length are read
-- back from it. The document holds what ranking needs of its item (confidence, last
-- change, expiry, kind) and each term's frequency beside its term (same order), so a
-- rebuild rewrites postings without opening content. Derived data, as before: deleted with
-- the item's postings when it leaves `active`, keyed term hashes and counts only.
ALTER TABLE search_docs
    ADD COLUMN confidence DOUBLE PRECISION,
    ADD COLUMN updated_at BIGINT,
    ADD COLUMN expires_at BIGINT,
    ADD COLUMN kind       TEXT COLLATE "C",
    ADD COLUMN tfs        INTEGER[];
UPDATE search_docs AS d
    SET confidence = m.confidence, updated_at = m.updated_at, expires_at = m.expires_at,
        kind = m.kind,
        -- One frequency per term, in the terms' order: a term without a posting (drift)
        -- counts once rather than shifting the frequencies after it.
        tfs = coalesce((SELECT array_agg(coalesce(p.tf, 1) ORDER BY t.n)
                        FROM unnest(d.terms) WITH ORDINALITY AS t (term, n)
                        LEFT JOIN postings AS p
                          ON p.scope = d.scope AND p.term = t.term AND p.item = d.item),
                       '{}')
    FROM memories AS m WHERE m.rowid = d.item;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM search_docs
               WHERE cardinality(tfs) <> cardinality(coalesce(terms, '{}'))) THEN
        RAISE EXCEPTION 'migration 0009: a search document''s frequencies do not match its terms';
    END IF;
END
$$;
ALTER TABLE search_docs
    ALTER COLUMN confidence SET NOT NULL,
    ALTER COLUMN updated_at SET NOT NULL,
    ALTER COLUMN expires_at SET NOT NULL,
    ALTER COLUMN kind SET NOT NULL,
    ALTER COLUMN tfs SET NOT NULL;

CREATE TABLE postings_0009 (
    scope  BIGINT  NOT NULL,
    term   BIGINT  NOT NULL,
    impact INTEGER NOT NULL,
    item   BIGINT  NOT NULL,
    CONSTRAINT postings_0009_pkey PRIMARY KEY (scope, term, impact, item)
);
INSERT INTO postings_0009 (scope, term, impact, item)
    SELECT scope, term, (tf << 16) | (65535 - length), item FROM postings;
DROP TABLE postings;
ALTER TABLE postings_0009 RENAME TO postings;
ALTER TABLE postings RENAME CONSTRAINT postings_0009_pkey TO postings_pkey;
