-- The second half of migration 9: its tables replace the old ones, whose documents'
-- frequencies it packed from the postings dropped here (secure delete overwrites them).
DROP TABLE postings;
ALTER TABLE postings_0009 RENAME TO postings;
DROP TABLE search_docs;
ALTER TABLE search_docs_0009 RENAME TO search_docs;
