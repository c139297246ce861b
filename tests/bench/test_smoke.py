"""The benchmark harness runs end to end (smoke preset); nothing here is about speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench.figures import FAILED, MEASURED, NOT_AVAILABLE, NOT_IN_PRESET, catalogue
from bench.presets import PRESETS

from tests.conftest import postgres_dsn

ROOT = Path(__file__).resolve().parents[2]
TOP_LEVEL = {
    "preset",
    "date",
    "seconds",
    "command",
    "invocation",
    "machine",
    "workload",
    "preset_parameters",
    "loads",
    "figures",
    "langgraph",
}
FIGURE_FIELDS = {"id", "title", "unit", "value", "status", "bar", "met", "ratios", "detail", "note"}
# Figures the smoke preset measures on every machine (no server or optional backend needed).
ALWAYS_MEASURED = {
    "raw_sqlite_full",
    "raw_sqlite_normal",
    "naive_writes",
    "naive_writes_durable",
    "writes_sequential_sqlite",
    "writes_first_subject_sqlite",
    "writes_concurrent16_sqlite",
    "floor_writes_sqlite",
    "search_single_scope",
    "naive_search_single_scope",
    "rebuild_projection",
    "replay_fold",
    "naive_reload",
    "rss_service",
    "rss_naive",
}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The JSON result of one smoke run, written to a temporary file, docs untouched."""
    output = tmp_path_factory.mktemp("bench") / "smoke.json"
    docs = ROOT / "docs" / "benchmarks.md"
    before = docs.read_bytes() if docs.exists() else None
    subprocess.run(
        [sys.executable, "-m", "bench", "--preset", "smoke", "--no-docs", "--output", str(output)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert (docs.read_bytes() if docs.exists() else None) == before
    result: dict[str, Any] = json.loads(output.read_text(encoding="utf-8"))
    return result


def test_the_smoke_result_has_every_top_level_key(smoke: dict[str, Any]) -> None:
    """The JSON names the preset, the machine, the workload, the loads and the figures."""
    assert set(smoke) >= TOP_LEVEL
    assert smoke["preset"] == "smoke"
    assert {"cores", "cpu", "memory_gib", "python", "sqlite"} <= set(smoke["machine"])


def test_the_smoke_result_has_every_expected_figure(smoke: dict[str, Any]) -> None:
    """Every figure id of the catalogue is present, each with every field."""
    expected = set(catalogue(PRESETS["smoke"].sizes))
    assert set(smoke["figures"]) == expected
    for figure in smoke["figures"].values():
        assert set(figure) == FIGURE_FIELDS
        assert figure["status"] in {MEASURED, NOT_AVAILABLE, NOT_IN_PRESET, FAILED}


def test_the_smoke_run_measures_the_in_process_figures(smoke: dict[str, Any]) -> None:
    """The figures that need no server are measured, as numbers, with no failure."""
    figures = smoke["figures"]
    for key in ALWAYS_MEASURED | {f"search_scoped_n{n}" for n in PRESETS["smoke"].sizes}:
        assert figures[key]["status"] == MEASURED, (key, figures[key]["note"])
        assert isinstance(figures[key]["value"], int | float)
    assert not [key for key, f in figures.items() if f["status"] == FAILED]


def test_the_smoke_run_searches_stores_held_in_the_page_cache(smoke: dict[str, Any]) -> None:
    """Each store's file, ours and LangGraph's, is read whole before its searches are
    timed (as the naive scan holds its items in memory), and the figure says so."""
    figures = smoke["figures"]
    keys = ["search_single_scope"]
    for n in PRESETS["smoke"].sizes:
        keys += [f"search_scoped_n{n}", f"peer_search_n{n}"]
    for key in keys:
        detail = figures[key]["detail"]
        assert detail["paged_in_mib"] > 0, key
        assert "page cache" in figures[key]["note"], key


def test_the_smoke_run_puts_langgraphs_stores_beside_ours(smoke: dict[str, Any]) -> None:
    """LangGraph's stores are measured in the same run and each pair reported as a ratio."""
    figures = smoke["figures"]
    peer = ["peer_writes_sqlite", "peer_file_sqlite", "peer_rss", "file_sqlite"]
    peer += [f"peer_search_n{n}" for n in PRESETS["smoke"].sizes]
    for key in peer:
        assert figures[key]["status"] == MEASURED, (key, figures[key]["note"])
    rows = {row["figure"]: row for row in smoke["langgraph"]}
    assert "SQLite file at the largest store, MiB" in rows
    for row in rows.values():
        assert row["ratio"] == pytest.approx(row["ours"] / row["langgraph"])
    assert "memories" in figures["file_sqlite"]["detail"]["tables_mib"]


def test_the_smoke_run_puts_our_postgresql_search_beside_langgraphs(smoke: dict[str, Any]) -> None:
    """With a server, our PostgreSQL search and PostgresStore's fetch-and-rank run on the
    same items and queries, and their p50s are a row of the LangGraph table."""
    if not smoke["machine"]["postgresql"]:
        postgres_dsn()  # skips without a server, fails in CI; with one, the run missed it
        pytest.fail("a PostgreSQL server is up but the smoke run did not use it")
    figures = smoke["figures"]
    for key in ("search_scoped_postgres", "peer_search_postgres"):
        assert figures[key]["status"] == MEASURED, (key, figures[key]["note"])
        assert figures[key]["detail"]["stored"] == PRESETS["smoke"].postgres_search
    assert figures["search_scoped_postgres"]["detail"]["mean_results"] > 0
    assert figures["search_scoped_postgres"]["met"] in {True, False}
    rows = {row["figure"]: row for row in smoke["langgraph"]}
    row = rows["search p50 at 300 items, PostgreSQL, ms"]
    assert row["ours"] == figures["search_scoped_postgres"]["detail"]["p50_ms"]
    assert row["langgraph"] == figures["peer_search_postgres"]["detail"]["p50_ms"]


def test_the_smoke_run_replays_the_services_writes_beside_each_write_bars_baseline(
    smoke: dict[str, Any],
) -> None:
    """The storage floor of each backend: the replay's rate over the baseline of the bar
    it bounds, measured in the same turns (``bench.floor``)."""
    if not smoke["machine"]["postgresql"]:
        postgres_dsn()  # skips without a server, fails in CI
    figures = smoke["figures"]
    expected = {
        "floor_writes_sqlite": ("raw SQLite FULL, same turns", "raw_full"),
        "floor_writes_postgres": ("LangGraph PostgresStore, same turns", "langgraph"),
    }
    for key, (label, base) in expected.items():
        figure = figures[key]
        assert figure["status"] == MEASURED, (key, figure["note"])
        detail = figure["detail"]
        assert detail["writes"] == PRESETS["smoke"].writes
        ratio = detail["replay"]["per_second"] / detail[base]["per_second"]
        assert figure["ratios"][label] == pytest.approx(ratio)
    assert figures["floor_writes_sqlite"]["detail"]["pragmas"]["synchronous"] == 2  # FULL
    assert figures["floor_writes_postgres"]["detail"]["synchronous_commit"]
