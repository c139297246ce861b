"""The same-run ratios that say how far a bar is from what the storage form allows."""

from __future__ import annotations

import pytest
from bench.figures import MEASURED, catalogue, evaluate


def test_the_file_is_put_beside_langgraphs_as_its_log_and_as_all_but_its_search_index() -> None:
    """Once LangGraph's file is measured, the log's tables alone and all but the search
    index (the log, the keys, the projection) are each a ratio to it."""
    figures = catalogue((1_000,))
    tables = {
        "events": 60.0,
        "sqlite_autoindex_events_1": 5.0,
        "events_by_memory": 3.0,
        "memories": 20.0,
        "item_keys": 10.0,
        "postings": 40.0,
        "search_docs": 20.0,
        "search_docs_by_scope": 5.0,
        "scopes": 1.0,
        "sqlite_autoindex_scopes_1": 0.5,
    }
    ours, theirs = figures["file_sqlite"], figures["peer_file_sqlite"]
    ours.value, ours.status, ours.detail["tables_mib"] = 164.5, MEASURED, tables
    evaluate(figures)  # LangGraph's file not measured: nothing to put it beside
    assert ours.ratios == {}
    theirs.value, theirs.status = 40.0, MEASURED
    evaluate(figures)
    assert ours.ratios == {
        "LangGraph, our log's tables alone": pytest.approx(68 / 40),
        "LangGraph, all but our search index": pytest.approx(98 / 40),
    }


def test_a_replay_is_put_over_each_baseline_of_its_turns() -> None:
    """A floor's ratios are of rates measured in the same turns, and it has no bar."""
    figures = catalogue((1_000,))
    sqlite, postgres = figures["floor_writes_sqlite"], figures["floor_writes_postgres"]
    sqlite.value, sqlite.status = 2_000.0, MEASURED
    sqlite.detail.update(
        replay={"per_second": 2_000.0},
        raw_full={"per_second": 8_000.0},
        service={"per_second": 1_000.0},
    )
    postgres.value, postgres.status = 1_500.0, MEASURED
    postgres.detail.update(
        replay={"per_second": 1_500.0},
        langgraph={"per_second": 3_000.0},
        raw_insert={"per_second": 6_000.0},
        service={"per_second": 750.0},
    )
    evaluate(figures)
    assert sqlite.ratios == {
        "raw SQLite FULL, same turns": 0.25,
        "the service, same turns": 2.0,
    }
    assert postgres.ratios == {
        "LangGraph PostgresStore, same turns": 0.5,
        "raw PostgreSQL, same turns": 0.25,
        "the service, same turns": 2.0,
    }
    assert sqlite.met is None and postgres.met is None  # a floor has no bar of its own
