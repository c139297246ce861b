"""LangGraph's stores as the benchmark's peer, on the same seeded workload.

``SqliteStore`` and ``PostgresStore`` (the dev dependencies langgraph-checkpoint-sqlite and
-postgres) are what an agent built on LangGraph would otherwise keep its memories in.
Each workload item is one ``put``: the namespace is its scope (tenant, agent, purpose),
the key its id, the value its content, kind, subject, confidence and provenance. Neither
store ranks text without an embedder, so a search is what a peer harness does: fetch the
scope (``search`` of the namespace, every item) and rank it in Python with BM25 (k1 1.2,
b 0.75, lower-cased words), limit 10. Both stores run with their defaults (SQLite: a
rollback journal and ``synchronous=FULL``; PostgreSQL: one autocommitted statement per
put, ``synchronous_commit`` as the server has it).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.stats import latency_summary, rate, timed_calls
from bench.workload import Item, Query, Workload

LOAD_BATCH = 1000  # puts per batch while loading (five parameters a row, under SQLite's cap)
FETCH_LIMIT = 1_000_000  # a peer fetches the whole scope
_WORD = re.compile(r"\w+")


def missing() -> str | None:
    """None when LangGraph's stores can be imported, else why not."""
    try:
        import langgraph.store.postgres
        import langgraph.store.sqlite  # noqa: F401
    except ImportError as error:
        return f"LangGraph's stores are not installed ({error})"
    return None


def namespace(item: Item | Query) -> tuple[str, str, str]:
    return (item.tenant_id, item.agent_id, item.purpose)


def value(item: Item) -> dict[str, Any]:
    body = item.body()
    keys = ("content", "kind", "subject_id", "confidence", "provenance")
    return {key: body[key] for key in keys}


@contextlib.contextmanager
def sqlite_store(path: Path) -> Iterator[Any]:
    """LangGraph's ``SqliteStore`` on ``path``, set up, with its defaults."""
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(path)) as store:
        store.setup()
        yield store


@contextlib.contextmanager
def postgres_store(dsn: str) -> Iterator[Any]:
    """LangGraph's ``PostgresStore`` in a schema of its own, dropped afterwards."""
    import psycopg
    from langgraph.store.postgres import PostgresStore
    from psycopg.conninfo import make_conninfo

    schema = f"bench_peer_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        conninfo = make_conninfo(dsn, options=f"-c search_path={schema}")
        with PostgresStore.from_conn_string(conninfo) as store:
            store.setup()
            yield store
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def load(store: Any, workload: Workload, start: int, stop: int) -> float:
    """Put items ``start .. stop-1`` in batches (loading is not a figure); seconds taken."""
    from langgraph.store.base import PutOp

    began = time.perf_counter()
    for first in range(start, stop, LOAD_BATCH):
        items = workload.items(first, min(stop, first + LOAD_BATCH))
        store.batch([PutOp(namespace(item), item.memory_id, value(item)) for item in items])
    return time.perf_counter() - began


def sequential_puts(store: Any, items: Sequence[Item]) -> float:
    """Puts/s of one caller putting ``items`` one after another (each its own commit)."""
    work = [(namespace(item), item.memory_id, value(item)) for item in items]
    began = time.perf_counter()
    for ns, key, body in work:
        store.put(ns, key, body)
    return rate(len(work), time.perf_counter() - began)


def bm25(
    query: str, texts: Sequence[str], limit: int, k1: float = 1.2, b: float = 0.75
) -> list[int]:
    """The indices of the ``limit`` best ``texts`` for ``query`` (Okapi BM25)."""
    terms = set(_WORD.findall(query.lower()))
    docs = [Counter(_WORD.findall(text.lower())) for text in texts]
    if not docs:
        return []
    lengths = [sum(doc.values()) for doc in docs]
    average = sum(lengths) / len(docs) or 1.0
    frequency = {term: sum(1 for doc in docs if term in doc) for term in terms}
    idf = {t: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for t, n in frequency.items() if n}
    scores: list[tuple[float, int]] = []
    for index, (doc, length) in enumerate(zip(docs, lengths, strict=True)):
        score = 0.0
        for term, weight in idf.items():
            tf = doc.get(term, 0)
            if tf:
                score += weight * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))
        if score > 0:
            scores.append((score, index))
    scores.sort(key=lambda pair: (-pair[0], pair[1]))
    return [index for _, index in scores[:limit]]


def search(store: Any, query: Query) -> list[Any]:
    """Fetch the query's scope and rank it client-side: the peer harness's search."""
    items = store.search(namespace(query), limit=FETCH_LIMIT)
    ranked = bm25(query.text, [item.value["content"] for item in items], 10)
    return [items[index] for index in ranked]


def searches(store: Any, queries: Sequence[Query], warmup: Sequence[Query]) -> dict[str, Any]:
    """Latency of the peer's searches over ``queries``, and how many items they returned."""
    returned: list[int] = []

    def call(query: Query) -> None:
        returned.append(len(search(store, query)))

    timed_calls(call, warmup)
    returned.clear()
    summary = latency_summary(timed_calls(call, queries))
    summary["mean_results"] = sum(returned) / len(returned)
    return summary


def file_mib(path: Path) -> float:
    """The size of a SQLite database with its journal files, after a checkpoint."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        if conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    files = [path, *(path.with_name(path.name + s) for s in ("-wal", "-journal", "-shm"))]
    return sum(f.stat().st_size for f in files if f.exists()) / (1024 * 1024)


def space(path: Path) -> dict[str, float]:
    """MiB each table and index of a SQLite database holds (the ``dbstat`` table)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        try:
            rows = conn.execute(
                "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
            ).fetchall()
        except sqlite3.OperationalError:  # SQLite built without SQLITE_ENABLE_DBSTAT_VTAB
            return {}
    return {name: round(size / (1024 * 1024), 2) for name, size in rows}
