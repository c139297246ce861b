"""The impact migration (SQLite 0009-0010, PostgreSQL 0009) on a store made before it:
the index moves to impact-ordered postings and documents with term frequencies, and
searches, verification, later changes and rebuilds give what they gave before.

The old store is made with today's code, then its two index tables are taken back to the
shape of migration 0001 (postings carrying tf, length, confidence, last change, expiry and
kind; documents carrying term ids only) and the migrations of the index since are
forgotten (SQLite: 0009, 0010 and 0013, the documents' index by scope), so opening it
again runs them on exactly the rows the old code wrote.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import psycopg
from psycopg import sql

from governed_memory.crypto import Keyring
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from governed_memory.store.postgres import PostgresStore
from governed_memory.store.sqlite import SQLiteStore
from tests.contract.test_verify_index import DPO, WRITER, every_change
from tests.support.fakes import FakeClock, body, query

SQLITE_BEFORE_0009 = """
CREATE TABLE postings_old (
    scope INTEGER NOT NULL, term INTEGER NOT NULL, item INTEGER NOT NULL,
    tf INTEGER NOT NULL, length INTEGER NOT NULL, confidence REAL NOT NULL,
    updated_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, kind TEXT NOT NULL,
    PRIMARY KEY (scope, term, item)) WITHOUT ROWID;
INSERT INTO postings_old SELECT p.scope, p.term, p.item, p.impact >> 16, d.length,
    d.confidence, d.updated_at, d.expires_at, d.kind
    FROM postings AS p JOIN search_docs AS d ON d.item = p.item;
CREATE TABLE search_docs_old (
    item INTEGER PRIMARY KEY, scope INTEGER NOT NULL, length INTEGER NOT NULL,
    terms BLOB NOT NULL);
INSERT INTO search_docs_old SELECT item, scope, length, terms FROM search_docs;
DROP TABLE postings;
ALTER TABLE postings_old RENAME TO postings;
DROP TABLE search_docs;
ALTER TABLE search_docs_old RENAME TO search_docs;
DELETE FROM schema_migrations WHERE version IN (9, 10, 13);
"""
POSTGRES_BEFORE_0009 = """
CREATE TABLE postings_old (
    scope BIGINT NOT NULL, term BIGINT NOT NULL, item BIGINT NOT NULL, tf INTEGER NOT NULL,
    length INTEGER NOT NULL, confidence DOUBLE PRECISION NOT NULL,
    updated_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, kind TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (scope, term, item));
INSERT INTO postings_old SELECT p.scope, p.term, p.item, p.impact >> 16, d.length,
    d.confidence, d.updated_at, d.expires_at, d.kind
    FROM postings AS p JOIN search_docs AS d ON d.item = p.item;
DROP TABLE postings;
ALTER TABLE postings_old RENAME TO postings;
ALTER TABLE postings RENAME CONSTRAINT postings_old_pkey TO postings_pkey;
ALTER TABLE search_docs DROP COLUMN confidence, DROP COLUMN updated_at,
    DROP COLUMN expires_at, DROP COLUMN kind, DROP COLUMN tfs;
DELETE FROM schema_migrations WHERE version = 9;
"""

QUERIES = ["email", "calls fridays", "lives lyon", "maybe promoted", "prefers"]


def searches(service: MemoryService) -> list[list[tuple[str, float]]]:
    return [
        [(hit.item.id, round(hit.score, 9)) for hit in service.search(WRITER, query(q)).items]
        for q in QUERIES
    ]


def check_migration(opened: Callable[[], Store], to_old_schema: Callable[[], None]) -> None:
    """Searches return the same hits with the same scores after the migration; replay
    --verify finds the migrated index clean; an item changed or erased afterwards leaves
    its migrated rows (found through their frequencies), and a rebuild agrees."""
    keyring, clock = Keyring(secrets.token_bytes(32)), FakeClock()
    service = MemoryService(opened(), keyring, clock=clock)
    every_change(service, clock)
    for n in range(40):
        service.write(WRITER, body(id=f"bulk{n}", content=f"Prefers email on day {n % 7}."))
    before = searches(service)
    service.store.close()
    to_old_schema()
    service = MemoryService(opened(), keyring, clock=clock)
    try:
        assert searches(service) == before
        assert service.verify_replay().differences == []
        service.write(WRITER, body(id="bulk1", content="Calls on Sundays.", expected_version=1))
        service.erase(DPO, "bulk2")
        assert service.verify_replay().differences == []
        assert [hit.item.id for hit in service.search(WRITER, query("sundays")).items] == ["bulk1"]
        changed = searches(service)
        service.maintenance.rebuild()
        assert service.verify_replay().differences == []
        assert searches(service) == changed
    finally:
        service.store.close()


def test_a_sqlite_store_made_before_impact_postings_searches_verifies_and_changes_alike(
    tmp_path: Path,
) -> None:
    """The SQLite migration, on the rows the old code wrote."""
    path = tmp_path / "gmem.sqlite3"

    def to_old_schema() -> None:
        with closing(sqlite3.connect(path)) as conn, conn:
            for statement in SQLITE_BEFORE_0009.split(";"):
                if statement.strip():
                    conn.execute(statement)

    check_migration(lambda: SQLiteStore(path, synchronous="OFF"), to_old_schema)


def test_a_postgres_store_made_before_impact_postings_searches_verifies_and_changes_alike(
    postgres_schema: tuple[str, str],
) -> None:
    """The PostgreSQL migration, on the rows the old code wrote."""
    dsn, schema = postgres_schema

    def to_old_schema() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            for statement in POSTGRES_BEFORE_0009.split(";"):
                if statement.strip():
                    conn.execute(statement.encode())

    check_migration(lambda: PostgresStore(dsn, schema=schema), to_old_schema)


def test_a_postgres_document_term_without_a_posting_does_not_shift_the_frequencies(
    postgres_schema: tuple[str, str],
) -> None:
    """The migration builds each document's frequencies beside its terms; a term whose old
    posting is missing (drift) gets frequency 1 in its own place, and every other term
    keeps its own frequency."""
    dsn, schema = postgres_schema
    keyring, clock = Keyring(secrets.token_bytes(32)), FakeClock()
    service = MemoryService(PostgresStore(dsn, schema=schema), keyring, clock=clock)
    service.write(WRITER, body(id="m", content="Alpha beta beta gamma gamma gamma delta."))
    service.store.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        for statement in POSTGRES_BEFORE_0009.split(";"):
            if statement.strip():
                conn.execute(statement.encode())
        row = conn.execute("SELECT item, scope, terms FROM search_docs").fetchone()
        assert row is not None
        item, scope, terms = row
        old = dict(conn.execute("SELECT term, tf FROM postings WHERE item = %s", (item,)))
        missing = terms[0]
        conn.execute("DELETE FROM postings WHERE term = %s AND item = %s", (missing, item))
        PostgresStore(dsn, schema=schema).close()  # runs migration 0009
        migrated = conn.execute("SELECT terms, tfs FROM search_docs WHERE scope = %s", (scope,))
        found = migrated.fetchone()
    assert found is not None and len(found[0]) == len(found[1]) == len(terms)
    assert dict(zip(found[0], found[1], strict=True)) == old | {missing: 1}
    assert sorted(old.values()) == [1, 1, 2, 3]
