"""One benchmark run: every figure of the preset, measured in order, then ratios and bars.

A figure that cannot be measured (its backend is not built yet, no server) is reported
as not available; a figure whose measurement raises is reported as failed with the
error, and the run goes on, so one broken part never hides the others.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import floor, httpserver, inprocess, loading, peer, postgres, raw, rebuild, rss
from bench.figures import (
    FAILED,
    MEASURED,
    NOT_AVAILABLE,
    Figure,
    catalogue,
    evaluate,
    http_key,
    peer_comparisons,
    size_label,
)
from bench.machine import describe
from bench.naive import NaiveMemory
from bench.presets import Preset
from bench.workload import Workload
from governed_memory.bootstrap import open_service
from governed_memory.service import MemoryService

MAKE_TARGETS = {"smoke": "make bench-smoke", "quick": "make bench", "full": "make bench-full"}


class Run:
    """The state of one run: the preset, its figures, its load reports, its clock."""

    def __init__(self, preset: Preset, scratch: Path, cache: Path | None) -> None:
        self.preset = preset
        self.scratch = scratch
        self.cache = cache
        self.figures = catalogue(preset.sizes, preset.postgres_search)
        self.loads: dict[str, dict[str, Any]] = {}
        self.workload = Workload()
        self.dsn = raw.postgres_dsn()
        self.started = time.perf_counter()

    def say(self, message: str) -> None:
        elapsed = time.perf_counter() - self.started
        print(f"[{elapsed:7.1f}s] {message}", file=sys.stderr, flush=True)

    def set(self, key: str, value: float, note: str = "", **detail: Any) -> None:
        figure = self.figures[key]
        figure.value, figure.status, figure.note = value, MEASURED, note
        figure.detail.update(detail)

    def unavailable(self, keys: tuple[str, ...], reason: str) -> None:
        for key in keys:
            self.figures[key].status, self.figures[key].note = NOT_AVAILABLE, reason

    @contextlib.contextmanager
    def step(self, *keys: str) -> Iterator[None]:
        """Mark ``keys`` failed (and go on) if the measurement inside raises."""
        try:
            yield
        except Exception as error:  # noqa: BLE001 - reported in the results, run goes on
            traceback.print_exc()
            for key in keys:
                figure = self.figures[key]
                if figure.status != MEASURED:
                    figure.status, figure.note = FAILED, f"{type(error).__name__}: {error}"[:300]

    def service(self, data_dir: Path) -> MemoryService:
        return open_service(data_dir=data_dir, synchronous="FULL")


FLOOR_NOTE = (
    "each write's statements as the service sent them (PostgreSQL: its one message), replayed"
    " on a copy of the store by a bare loop, in turns with the service and the baselines"
    " (python -m bench.floor): the most a sequential durable write of this storage form"
    " reaches, whatever the service's Python before it costs"
)


def _writes(run: Run) -> None:
    preset, workload = run.preset, run.workload
    sequential = workload.items(
        inprocess.SEQUENTIAL_OFFSET, inprocess.SEQUENTIAL_OFFSET + preset.writes
    )
    concurrent = workload.items(
        inprocess.CONCURRENT_OFFSET, inprocess.CONCURRENT_OFFSET + preset.concurrent_writes
    )
    run.say("raw limits and the naive baseline's writes")
    with run.step("raw_sqlite_full", "raw_sqlite_normal"):
        rows = preset.raw_rows
        run.set(
            "raw_sqlite_full",
            raw.sqlite_commits_per_second(run.scratch / "raw-full.db", "FULL", rows),
            rows=rows,
        )
        run.set(
            "raw_sqlite_normal",
            raw.sqlite_commits_per_second(run.scratch / "raw-normal.db", "NORMAL", rows),
            rows=rows,
        )
    with run.step("naive_writes", "naive_writes_durable"):
        run.set(
            "naive_writes",
            inprocess.naive_writes(run.scratch / "naive-w.jsonl", sequential, durable=False),
        )
        run.set(
            "naive_writes_durable",
            inprocess.naive_writes(run.scratch / "naive-d.jsonl", sequential, durable=True),
        )
    run.say(f"service writes: {len(sequential)} sequential, {len(concurrent)} by 16 threads")
    keys = ("writes_sequential_sqlite", "writes_first_subject_sqlite", "writes_concurrent16_sqlite")
    with run.step(*keys):
        service = run.service(run.scratch / "writes")
        try:
            count, seconds = inprocess.first_writes(service, [*sequential, *concurrent])
            run.set("writes_first_subject_sqlite", count / seconds, writes=count)
            run.set(
                "writes_sequential_sqlite",
                inprocess.sequential_writes(service, sequential),
                note="subjects already have their keys (a first write: separate figure)",
                writes=len(sequential),
            )
            run.set(
                "writes_concurrent16_sqlite",
                inprocess.concurrent_writes(service, concurrent, preset.writers),
                writes=len(concurrent),
                threads=preset.writers,
            )
        finally:
            service.store.close()
    with run.step("floor_writes_sqlite"):
        result = floor.sqlite_floor(preset.writes, floor.CHUNK)
        run.set(
            "floor_writes_sqlite",
            result["replay"]["per_second"],
            note=FLOOR_NOTE,
            **result,
        )
    with run.step("peer_writes_sqlite"):
        if (reason := peer.missing()) is not None:
            run.unavailable(("peer_writes_sqlite",), reason)
        else:
            with peer.sqlite_store(run.scratch / "peer-writes.db") as store:
                run.set("peer_writes_sqlite", peer.sequential_puts(store, sequential))
    with run.step("raw_sqlite_full"):
        # The disk's fsync latency drifts with the neighbours' load: the raw FULL rate is
        # measured before and after the service's writes, and their mean is the baseline.
        before = run.figures["raw_sqlite_full"].value
        after = raw.sqlite_commits_per_second(
            run.scratch / "raw-full-after.db", "FULL", preset.raw_rows
        )
        if before is not None:
            run.set("raw_sqlite_full", (before + after) / 2, before=before, after=after)


def _postgres(run: Run) -> None:
    service_keys = ("writes_sequential_postgres", "writes_concurrent16_postgres")
    keys = ("raw_postgres", *service_keys, "floor_writes_postgres")
    reason = raw.postgres_reachable(run.dsn)
    if reason is not None:
        run.unavailable(keys, reason)
        return
    run.say("PostgreSQL raw inserts")
    with run.step("raw_postgres"):
        run.set("raw_postgres", raw.postgres_inserts_per_second(run.dsn, run.preset.raw_rows))
    missing = postgres.store_missing()
    if missing is not None:
        run.unavailable(keys[1:], missing)
        return
    run.say("PostgreSQL service writes")
    w, preset = run.workload, run.preset
    sequential = w.items(inprocess.SEQUENTIAL_OFFSET, inprocess.SEQUENTIAL_OFFSET + preset.writes)
    concurrent = w.items(
        inprocess.CONCURRENT_OFFSET, inprocess.CONCURRENT_OFFSET + preset.concurrent_writes
    )
    with run.step(*service_keys):
        rates = postgres.service_writes(run.dsn, sequential, concurrent, preset.writers)
        run.set("writes_sequential_postgres", rates["sequential_per_s"], **rates)
        run.set("writes_concurrent16_postgres", rates["concurrent_per_s"], threads=preset.writers)
    with run.step("floor_writes_postgres"):
        if (reason := peer.missing()) is not None:
            run.unavailable(("floor_writes_postgres",), reason)
        else:
            result = floor.postgres_floor(preset.writes, floor.CHUNK, run.dsn)
            run.set(
                "floor_writes_postgres",
                result["replay"]["per_second"],
                note=FLOOR_NOTE,
                **result,
            )
    with run.step("peer_writes_postgres"):
        if (reason := peer.missing()) is not None:
            run.unavailable(("peer_writes_postgres",), reason)
        else:
            with peer.postgres_store(run.dsn) as store:
                run.set("peer_writes_postgres", peer.sequential_puts(store, sequential))


def _postgres_search(run: Run) -> None:
    """Our scoped searches on PostgreSQL beside LangGraph's PostgresStore fetch-and-rank,
    both over the same first ``postgres_search`` workload items, with the same queries."""
    n, keys = run.preset.postgres_search, ("search_scoped_postgres", "peer_search_postgres")
    if not n:
        return
    reason = raw.postgres_reachable(run.dsn) or postgres.store_missing()
    if reason is not None:
        run.unavailable(keys, reason)
        return
    queries, warmup = inprocess.search_queries(run.workload, n, run.preset.queries)
    label = size_label(n)
    run.say(f"PostgreSQL: loading {label} items, then its scoped searches")
    with (
        run.step(keys[0]),
        postgres.loaded_service(run.dsn, run.workload, n, run.preset.writers) as (service, seconds),
    ):
        run.loads[f"PostgreSQL {label} ({run.preset.writers} writer threads)"] = _one_process_load(
            n, seconds, "off"
        )
        summary = inprocess.service_search(service, queries, warmup)
        run.set(keys[0], summary["p95_ms"], stored=n, **summary)
    if (reason := peer.missing()) is not None:
        run.unavailable(keys[1:], reason)
        return
    run.say(f"LangGraph PostgresStore: loading {label} items, then its searches")
    with run.step(keys[1]), peer.postgres_store(run.dsn) as store:
        seconds = peer.load(store, run.workload, 0, n)
        run.loads["LangGraph PostgresStore (`batch` of 1,000 puts)"] = _one_process_load(
            n, seconds, "on"
        )
        summary = peer.searches(store, queries, warmup)
        run.set(keys[1], summary["p95_ms"], stored=n, **summary)


def _one_process_load(items: int, seconds: float, synchronous: str) -> dict[str, Any]:
    """How one process loaded ``items`` in ``seconds`` (as :class:`bench.loading.Load`
    reports it)."""
    return {
        "items": items,
        "seconds": seconds,
        "items_per_s": items / seconds,
        "processes": 1,
        "synchronous": synchronous,
        "reused_from_cache": 0,
    }


def _search_at(run: Run, data_dir: Path, naive: NaiveMemory, n: int) -> None:
    preset, workload = run.preset, run.workload
    queries, warmup = inprocess.search_queries(workload, n, preset.queries)
    with run.step(f"search_scoped_n{n}"):
        service = run.service(data_dir)
        try:
            paged = inprocess.page_in(_database(data_dir))
            summary = inprocess.service_search(service, queries, warmup)
        finally:
            service.store.close()
        run.set(
            f"search_scoped_n{n}",
            summary["p95_ms"],
            _paged_note(paged),
            stored=n,
            **summary,
            **paged,
        )
    with run.step(f"naive_search_n{n}"):
        summary = inprocess.naive_search(naive, queries[: preset.naive_queries])
        run.set(f"naive_search_n{n}", summary["p95_ms"], stored=n, **summary)


def _database(data_dir: Path) -> Path:
    """Our SQLite file in ``data_dir``."""
    from governed_memory.store.sqlite.store import DATABASE_FILE

    return data_dir / DATABASE_FILE


def _paged_note(paged: dict[str, float]) -> str:
    return (
        f"the store's file read into the OS page cache first ({paged['paged_in_mib']:,.0f} "
        f"MiB in {paged['page_in_s']:.1f} s), as the naive scan holds its items in memory"
    )


def _scoped(run: Run) -> None:
    data_dir = run.scratch / "scoped"
    naive = NaiveMemory(run.scratch / "naive-scoped.jsonl")
    for n in run.preset.sizes:
        label = size_label(n)
        run.say(f"loading the {label} store")
        report = loading.ensure(data_dir, run.workload, n, run.preset.loaders, run.cache)
        run.loads[f"scoped {label}"] = report.to_dict()
        for index in range(len(naive.items), n):
            item = run.workload.item(index)
            naive.write(item.tenant_id, item.body(), log=False)
        run.say(f"scoped search at {label}")
        _search_at(run, data_dir, naive, n)
        _peer_search_at(run, n)
    largest = run.preset.sizes[-1]
    _files(run, data_dir)
    _rebuild(run, data_dir, naive)
    _rss(run, data_dir, largest)


def _peer_search_at(run: Run, n: int) -> None:
    """LangGraph's SqliteStore grown to ``n`` items, searched with the same queries."""
    key = f"peer_search_n{n}"
    if (reason := peer.missing()) is not None:
        run.unavailable((key, "peer_file_sqlite", "peer_rss"), reason)
        return
    run.say(f"LangGraph SqliteStore: loading to {size_label(n)}, then its searches")
    with run.step(key), peer.sqlite_store(run.scratch / "peer-scoped.db") as store:
        loaded = run.loads.setdefault(
            "LangGraph SqliteStore (`batch` of 1,000 puts)",
            {"items": 0, "seconds": 0.0, "processes": 1, "synchronous": "FULL"},
        )
        loaded["seconds"] += peer.load(store, run.workload, loaded["items"], n)
        loaded |= {"items": n, "items_per_s": n / loaded["seconds"], "reused_from_cache": 0}
        queries, warmup = inprocess.search_queries(run.workload, n, run.preset.queries)
        paged = inprocess.page_in(run.scratch / "peer-scoped.db")
        summary = peer.searches(store, queries, warmup)
        run.set(key, summary["p95_ms"], _paged_note(paged), stored=n, **summary, **paged)


def _files(run: Run, data_dir: Path) -> None:
    """The size of our SQLite file (per table and index) and of LangGraph's, same items."""
    with run.step("file_sqlite"):
        path = _database(data_dir)
        tables = peer.space(path)
        shares = ", ".join(f"{name} {mib:,.1f}" for name, mib in list(tables.items())[:12])
        note = f"MiB by table and index (dbstat): {shares}" if tables else ""
        run.set("file_sqlite", peer.file_mib(path), note=note, tables_mib=tables)
    theirs = run.scratch / "peer-scoped.db"
    if theirs.exists():
        with run.step("peer_file_sqlite"):
            run.set("peer_file_sqlite", peer.file_mib(theirs), tables_mib=peer.space(theirs))


def _rebuild(run: Run, data_dir: Path, naive: NaiveMemory) -> None:
    run.say("projection rebuild and replay")
    cap = run.preset.rebuild_cap
    with run.step("replay_fold"):
        service = run.service(data_dir)
        try:
            fold = inprocess.replay_fold(service, cap)
        finally:
            service.store.close()
        run.set("replay_fold", fold["events_per_s"], **fold)
    with run.step("rebuild_projection"):
        rebuilt = rebuild.measure(str(data_dir), run.preset.rebuild_seconds)
        note = (
            ""
            if rebuilt["done"]
            else (
                f"stopped after {run.preset.rebuild_seconds:.0f} s, {rebuilt['events']:,} events "
                f"({rebuilt['tenants']} tenants) in: the rate of the part done"
            )
        )
        run.set("rebuild_projection", rebuilt["events_per_s"], note=note, **rebuilt)
    with run.step("naive_reload"):
        reload = inprocess.naive_reload(run.scratch / "naive-reload.jsonl", naive, cap)
        run.set("naive_reload", reload["events_per_s"], **reload)


def _rss(run: Run, data_dir: Path, stored: int) -> None:
    run.say("peak RSS of a serving process (separate processes)")
    searches = min(run.preset.queries, 1000)
    with run.step("rss_service"):
        result = rss.measure(["service", str(data_dir), str(stored), str(searches)])
        run.set("rss_service", result["peak_mib"], stored=stored, **result)
    with run.step("rss_naive"):
        result = rss.measure(["naive", str(stored), str(run.preset.naive_queries)])
        run.set("rss_naive", result["peak_mib"], stored=stored, **result)
    theirs = run.scratch / "peer-scoped.db"
    if theirs.exists():
        with run.step("peer_rss"):
            result = rss.measure(["langgraph", str(theirs), str(stored), str(searches)])
            run.set("peer_rss", result["peak_mib"], stored=stored, **result)


def _single_scope(run: Run) -> None:
    n = run.preset.single_scope
    if not n:
        return
    workload = Workload(single_scope=True)
    data_dir = run.scratch / "single"
    run.say(f"loading the single scope of {size_label(n)} items")
    with run.step("search_single_scope", "naive_search_single_scope"):
        report = loading.ensure(data_dir, workload, n, run.preset.loaders, run.cache)
        run.loads[f"single scope {size_label(n)}"] = report.to_dict()
        queries, warmup = inprocess.search_queries(workload, n, run.preset.queries)
        service = run.service(data_dir)
        try:
            paged = inprocess.page_in(_database(data_dir))
            summary = inprocess.service_search(service, queries, warmup[:20])
        finally:
            service.store.close()
        run.set(
            "search_single_scope",
            summary["p95_ms"],
            _paged_note(paged),
            stored=n,
            **summary,
            **paged,
        )
        naive = NaiveMemory(run.scratch / "naive-single.jsonl")
        for item in workload.items(0, n):
            naive.write(item.tenant_id, item.body(), log=False)
        summary = inprocess.naive_search(naive, queries[: run.preset.naive_queries])
        run.set("naive_search_single_scope", summary["p95_ms"], stored=n, **summary)


def _http(run: Run) -> None:
    rounds = run.preset.http_workers
    keys = tuple(
        http_key(kind, workers) for workers in rounds for kind in ("search", "writes", "ceiling")
    )
    missing = httpserver.server_missing()
    if missing is not None:
        run.unavailable(keys, missing)
        return
    n = run.preset.http_store
    run.say(f"HTTP: loading {size_label(n)} items, then gmem serve and the load generator")
    with run.step(*keys):
        data_dir = run.scratch / "http"
        report = loading.ensure(data_dir, run.workload, n, run.preset.loaders, run.cache)
        run.loads[f"HTTP store {size_label(n)}"] = report.to_dict()
        results = httpserver.measure(
            data_dir, run.workload, n, run.preset.writers, run.preset.http_requests, rounds
        )
        for workers, result in zip(rounds, results, strict=True):
            for kind, part in (("search", "search"), ("writes", "write"), ("ceiling", "ceiling")):
                summary = result[part]
                note = (
                    ""
                    if set(summary["statuses"]) <= {"200", "201"}
                    else f"statuses {summary['statuses']}"
                )
                run.set(http_key(kind, workers), summary["per_s"], note=note, **summary)


def execute(preset: Preset, cache: Path | None) -> tuple[dict[str, Any], dict[str, Figure]]:
    """Measure every figure of ``preset``; the JSON-ready result and the figures."""
    date = datetime.now(UTC).isoformat(timespec="seconds")
    scratch = Path(tempfile.mkdtemp(prefix="gmem-bench-"))
    run = Run(preset, scratch, cache)
    machine = describe(run.dsn)
    try:
        _writes(run)
        _postgres(run)
        _postgres_search(run)
        _scoped(run)
        _single_scope(run)
        _http(run)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    evaluate(run.figures)
    comparisons = peer_comparisons(run.figures)
    result = {
        "preset": preset.name,
        "date": date,
        "seconds": time.perf_counter() - run.started,
        "command": MAKE_TARGETS[preset.name],
        "invocation": _invocation(sys.argv[1:]),
        "machine": machine,
        "workload": run.workload.describe(),
        "preset_parameters": {k: getattr(preset, k) for k in preset.__slots__},
        "loads": run.loads,
        "figures": {key: figure.to_dict() for key, figure in run.figures.items()},
        "langgraph": comparisons,
    }
    run.say("done")
    return result, run.figures


def _invocation(argv: list[str]) -> str:
    """The command line as run, each folder's path left out (no machine's paths in the
    report): ``--cache DIR``, ``--output PATH``."""
    folders = {"--cache": "DIR", "--output": "PATH"}
    shown: list[str] = []
    for arg in argv:
        flag, equals, _ = arg.partition("=")
        if equals and flag in folders:
            shown.append(f"{flag}={folders[flag]}")
        elif shown and shown[-1] in folders:
            shown.append(folders[shown[-1]])
        else:
            shown.append(arg)
    return " ".join(["python -m bench", *shown])
