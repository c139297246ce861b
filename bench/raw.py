"""The machine's raw limits: one single-row insert per commit, in SQLite and PostgreSQL.

The table is comparable to the service's hottest one: a text primary key, a tenant column
with one secondary index, and a body of about the size of a sealed item.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from bench.stats import rate

BODY = "x" * 300
#: The raw table's columns, and the columns of its one secondary index.
COLUMNS = "id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, body TEXT"
INDEXED = "(tenant_id, id)"
INSERT = "INSERT INTO raw (id, tenant_id, body) VALUES (?, ?, ?)"


def rows(count: int, start: int = 0) -> list[tuple[str, str, str]]:
    """Rows ``start`` … ``start + count - 1``: a fresh text key, one of 1,000 tenants, the body."""
    return [(str(uuid.uuid4()), f"t{n % 1000:04d}", BODY) for n in range(start, start + count)]


def sqlite_table(conn: sqlite3.Connection, synchronous: str) -> None:
    """The raw table on ``conn`` (WAL, the given sync mode)."""
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute(f"CREATE TABLE raw ({COLUMNS})")
    conn.execute(f"CREATE INDEX raw_by_tenant ON raw {INDEXED}")


def sqlite_commit(conn: sqlite3.Connection, row: tuple[str, str, str]) -> None:
    """One row in a ``BEGIN IMMEDIATE … COMMIT`` of its own."""
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(INSERT, row)
    conn.execute("COMMIT")


def sqlite_commits_per_second(path: Path, synchronous: str, count: int) -> float:
    """Rows/s inserting one row per ``BEGIN IMMEDIATE … COMMIT`` (WAL, given sync mode)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        sqlite_table(conn, synchronous)
        made = rows(count)
        start = time.perf_counter()
        for row in made:
            sqlite_commit(conn, row)
        return rate(count, time.perf_counter() - start)
    finally:
        conn.close()


def postgres_dsn() -> str:
    """The server the benchmark uses: ``GMEM_BENCH_POSTGRES_DSN``, else the test server."""
    return os.environ.get(
        "GMEM_BENCH_POSTGRES_DSN",
        os.environ.get("GMEM_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"),
    )


def postgres_reachable(dsn: str) -> str | None:
    """None when a server answers at ``dsn``, else why not."""
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as error:  # noqa: BLE001 - any failure means: not reachable
        return f"PostgreSQL at {dsn} is not reachable ({type(error).__name__})"
    return None


def postgres_table(conn: Any, schema: str) -> str:
    """The raw table in ``schema`` (made here); the statement inserting one row."""
    conn.execute(f"CREATE SCHEMA {schema}")
    conn.execute(f"CREATE TABLE {schema}.raw ({COLUMNS})")
    conn.execute(f"CREATE INDEX ON {schema}.raw {INDEXED}")
    return f"INSERT INTO {schema}.raw (id, tenant_id, body) VALUES (%s, %s, %s)"


def postgres_inserts_per_second(dsn: str, count: int) -> float:
    """Rows/s inserting one row per autocommitted statement, ``synchronous_commit=on``."""
    import psycopg

    schema = f"bench_raw_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        try:
            sql = postgres_table(conn, schema)
            made = rows(count)
            with conn.cursor() as cursor:
                start = time.perf_counter()
                for row in made:
                    cursor.execute(sql, row)
                return rate(count, time.perf_counter() - start)
        finally:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
