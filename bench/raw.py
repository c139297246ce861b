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

from bench.stats import rate

BODY = "x" * 300


def sqlite_commits_per_second(path: Path, synchronous: str, rows: int) -> float:
    """Rows/s inserting one row per ``BEGIN IMMEDIATE … COMMIT`` (WAL, given sync mode)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("CREATE TABLE raw (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, body TEXT)")
        conn.execute("CREATE INDEX raw_by_tenant ON raw (tenant_id, id)")
        keys = [str(uuid.uuid4()) for _ in range(rows)]
        start = time.perf_counter()
        for number, key in enumerate(keys):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO raw (id, tenant_id, body) VALUES (?, ?, ?)",
                (key, f"t{number % 1000:04d}", BODY),
            )
            conn.execute("COMMIT")
        return rate(rows, time.perf_counter() - start)
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


def postgres_inserts_per_second(dsn: str, rows: int) -> float:
    """Rows/s inserting one row per autocommitted statement, ``synchronous_commit=on``."""
    import psycopg

    schema = f"bench_raw_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(
                f"CREATE TABLE {schema}.raw "
                "(id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, body TEXT)"
            )
            conn.execute(f"CREATE INDEX ON {schema}.raw (tenant_id, id)")
            sql = f"INSERT INTO {schema}.raw (id, tenant_id, body) VALUES (%s, %s, %s)"
            keys = [str(uuid.uuid4()) for _ in range(rows)]
            with conn.cursor() as cursor:
                start = time.perf_counter()
                for number, key in enumerate(keys):
                    cursor.execute(sql, (key, f"t{number % 1000:04d}", BODY))
                return rate(rows, time.perf_counter() - start)
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
