"""Reading newest first walks the same indexes backwards: no sort of a tenant's rows, on
SQLite and PostgreSQL (the query plans, as each database chooses them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governed_memory.core.values import Status
from governed_memory.records import BrowseRequest
from governed_memory.store.postgres import PostgresStore
from governed_memory.store.sqlite import SQLiteStore
from tests.conftest import make_store
from tests.support.fakes import START

Statements = list[tuple[str, list[Any]]]


def _statements(store: Any) -> Statements:
    """The reads of a newest-first review queue page (after a cursor) and of feed pages,
    as run."""
    seen: Statements = []
    database = store.database
    query = database.query

    def recording(sql: str, params: Any = (), **options: Any) -> list[Any]:
        seen.append((sql, list(params)))
        return query(sql, params, **options)

    database.query = recording
    try:
        store.browse(
            BrowseRequest(
                "acme",
                frozenset({"support-bot"}),
                START,
                51,
                status=Status.QUARANTINED,
                after=(1_000, "m1"),
                newest_first=True,
            )
        )
        store.events_before("acme", 1_000, 100)
        store.events_before("acme", None, 100)
    finally:
        database.query = query
    assert len(seen) == 3
    return seen


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    yield from make_store(request.param, tmp_path)


def test_newest_first_reads_use_an_index_and_sort_nothing(sql_store: Any) -> None:
    for sql, params in _statements(sql_store):
        plan = _plan(sql_store, sql, params)
        text = " | ".join(plan)
        if isinstance(sql_store, SQLiteStore):
            assert "TEMP B-TREE" not in text, (sql, plan)
            assert "USING INDEX" in text or "USING COVERING INDEX" in text, (sql, plan)
        else:
            assert "Sort" not in text, (sql, plan)
            assert "Index Scan Backward" in text, (sql, plan)


def _plan(store: Any, sql: str, params: list[Any]) -> list[str]:
    if isinstance(store, SQLiteStore):
        return store.explain(sql, params)
    assert isinstance(store, PostgresStore)
    # An empty table is read whole by any plan: ask for the plan of a large one.
    with store.database.connection() as conn:
        conn.execute("SET enable_seqscan = off")
        try:
            rows = conn.execute("EXPLAIN (COSTS OFF) " + sql, params).fetchall()
        finally:
            conn.execute("RESET enable_seqscan")
    return [row[0] for row in rows]
