"""The figures of one run, their bars from SPEC §12 and their same-run ratios.

Every figure has a fixed id, so a run of any preset yields the same keys: a figure the
preset does not measure is ``not in preset``, one whose backend does not exist yet is
``not available`` (with the reason), one that raised is ``failed``.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

MEASURED = "measured"
NOT_AVAILABLE = "not available"
NOT_IN_PRESET = "not in preset"
FAILED = "failed"
MILLION = 1_000_000


@dataclass
class Figure:
    id: str
    title: str
    unit: str
    value: float | None = None
    status: str = NOT_IN_PRESET
    bar: str = ""
    met: bool | None = None
    ratios: dict[str, float] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def size_label(n: int) -> str:
    if n >= MILLION and n % MILLION == 0:
        return f"{n // MILLION}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def catalogue(sizes: Iterable[int], postgres_search: int = 0) -> dict[str, Figure]:
    """Every figure of a run whose scoped searches use ``sizes`` (plus the 1M bar), and
    whose PostgreSQL store holds ``postgres_search`` items (0: none)."""
    at = f", N = {size_label(postgres_search)}" if postgres_search else ""
    figures = [
        Figure("raw_sqlite_full", "Raw SQLite single-row commit, FULL", "commits/s"),
        Figure("raw_sqlite_normal", "Raw SQLite single-row commit, NORMAL", "commits/s"),
        Figure("raw_postgres", "Raw PostgreSQL single-row insert, synchronous_commit=on", "rows/s"),
        Figure("naive_writes", "Naive baseline writes (JSON-lines append, no fsync)", "writes/s"),
        Figure("naive_writes_durable", "Naive baseline writes with fsync per append", "writes/s"),
        Figure(
            "writes_sequential_sqlite",
            "Durable sequential writes, SQLite FULL",
            "writes/s",
            bar="≥ 50 % of raw FULL commit rate",
        ),
        Figure(
            "writes_first_subject_sqlite",
            "First write of a subject (creates its key), SQLite FULL",
            "writes/s",
        ),
        Figure(
            "writes_concurrent16_sqlite",
            "Writes with 16 concurrent writer threads, SQLite FULL",
            "writes/s",
            bar="≥ 2× the sequential rate",
        ),
        Figure(
            "writes_sequential_postgres",
            "Durable sequential writes, PostgreSQL",
            "writes/s",
            bar="≥ 50 % of raw PostgreSQL insert rate",
        ),
        Figure(
            "writes_concurrent16_postgres",
            "Writes with 16 concurrent writer threads, PostgreSQL",
            "writes/s",
        ),
        Figure(
            "floor_writes_sqlite",
            "The service's write statements replayed alone (no service Python), SQLite FULL",
            "writes/s",
        ),
        Figure(
            "floor_writes_postgres",
            "The service's write messages replayed alone (no service Python), PostgreSQL",
            "writes/s",
        ),
    ]
    for n in sorted({*sizes, MILLION}):
        label = size_label(n)
        figures.append(
            Figure(
                f"search_scoped_n{n}",
                f"Scoped search p95, in-process, SQLite, N = {label}",
                "ms",
                bar="≤ 2 ms and ≥ 100× faster than naive" if n == MILLION else "(bar is at 1M)",
            )
        )
        figures.append(Figure(f"naive_search_n{n}", f"Naive scan p95, N = {label}", "ms"))
    figures += [
        Figure(
            "search_single_scope",
            "Search p95 inside one 100k-item scope (3 terms)",
            "ms",
            bar="≤ 25 ms",
        ),
        Figure("naive_search_single_scope", "Naive scan p95 inside the single scope", "ms"),
        Figure(
            "search_scoped_postgres",
            f"Scoped search p95, in-process, PostgreSQL{at}",
            "ms",
            bar="p50 ≤ LangGraph PostgresStore's fetch-and-rank",
        ),
        Figure(
            "rebuild_projection",
            "Projection rebuild from the log (service.maintenance.rebuild)",
            "events/s",
            bar="≥ 50,000 events/s",
        ),
        Figure(
            "replay_fold",
            "Core replay (fold of decoded events, no IO)",
            "events/s",
            bar="≥ 50,000 events/s",
        ),
        Figure(
            "naive_reload", "Naive baseline reloading its dict from the JSON-lines log", "events/s"
        ),
        Figure(
            "rss_service",
            "Peak RSS of a process serving searches over the largest store",
            "MiB",
            bar="< 300 MiB with 1M items",
        ),
        Figure("rss_naive", "Peak RSS of the naive baseline holding the same items", "MiB"),
        *_peer_figures(sizes, at),
        *_http_figures(),
    ]
    return {figure.id: figure for figure in figures}


#: ``gmem serve --workers N`` of the HTTP figures; 1 keeps the figures' original ids.
HTTP_WORKERS = (1, 2, 4)


def http_key(kind: str, workers: int) -> str:
    """``http_search`` (one worker), ``http_search_w2``, ``http_search_w4``…"""
    return f"http_{kind}" if workers == 1 else f"http_{kind}_w{workers}"


def _http_figures() -> list[Figure]:
    figures = []
    for workers in HTTP_WORKERS:
        served = "1 worker process" if workers == 1 else f"{workers} worker processes"
        figures += [
            Figure(
                http_key("search", workers),
                f"HTTP searches, 16 concurrent clients, {served} (load generator in another "
                "process)",
                "requests/s",
                bar="≥ 1,000/s, p99 ≤ 50 ms",
            ),
            Figure(
                http_key("writes", workers),
                f"HTTP writes, 16 concurrent clients, {served} (load generator in another process)",
                "requests/s",
                bar="≥ 500/s, p99 ≤ 50 ms",
            ),
            Figure(
                http_key("ceiling", workers),
                f"Load generator ceiling: GET /health/live, 16 clients, {served}",
                "requests/s",
            ),
        ]
    return figures


def _peer_figures(sizes: Iterable[int], postgres_at: str) -> list[Figure]:
    """LangGraph's stores measured in the same run (bench/peer.py), and our file size."""
    peer = "LangGraph SqliteStore"
    return [
        Figure("peer_writes_sqlite", f"{peer} sequential puts (its defaults)", "writes/s"),
        Figure("peer_writes_postgres", "LangGraph PostgresStore sequential puts", "writes/s"),
        *(
            Figure(
                f"peer_search_n{n}",
                f"{peer} search (fetch the scope, BM25 in Python), N = {size_label(n)}",
                "ms",
            )
            for n in sorted(sizes)
        ),
        Figure(
            "peer_search_postgres",
            f"LangGraph PostgresStore search (fetch the scope, BM25 in Python){postgres_at}",
            "ms",
        ),
        Figure("file_sqlite", "SQLite file of the largest scoped store", "MiB"),
        Figure("peer_file_sqlite", f"{peer} file holding the same items", "MiB"),
        Figure("peer_rss", f"Peak RSS of a fresh process serving {peer}'s largest store", "MiB"),
    ]


# (what, ours, LangGraph's, the detail compared or "" for the value): governed-memory ÷ LangGraph
PEER_PAIRS: tuple[tuple[str, str, str, str], ...] = (
    ("durable sequential writes/s, SQLite", "writes_sequential_sqlite", "peer_writes_sqlite", ""),
    (
        "durable sequential writes/s, PostgreSQL",
        "writes_sequential_postgres",
        "peer_writes_postgres",
        "",
    ),
    ("SQLite file at the largest store, MiB", "file_sqlite", "peer_file_sqlite", ""),
    ("peak RSS serving the largest store, MiB", "rss_service", "peer_rss", ""),
)


def peer_comparisons(figures: dict[str, Figure]) -> list[dict[str, Any]]:
    """Each figure beside LangGraph's of the same run: ours, theirs, ours ÷ theirs."""
    pairs = list(PEER_PAIRS)
    for key in figures:
        if key.startswith("peer_search_n"):
            n = int(key.removeprefix("peer_search_n"))
            what = f"search p50 at {size_label(n)} items, ms"
            pairs.append((what, f"search_scoped_n{n}", key, "p50_ms"))
    stored = figures.get("search_scoped_postgres", Figure("", "", "")).detail.get("stored")
    if isinstance(stored, int):
        what = f"search p50 at {size_label(stored)} items, PostgreSQL, ms"
        pairs.append((what, "search_scoped_postgres", "peer_search_postgres", "p50_ms"))
    rows = []
    for what, ours_key, peer_key, detail in pairs:
        ours, peer = _value(figures, ours_key), _value(figures, peer_key)
        if ours is None or peer is None:
            continue
        if detail:
            ours, peer = figures[ours_key].detail.get(detail), figures[peer_key].detail.get(detail)
            if not isinstance(ours, int | float) or not isinstance(peer, int | float):
                continue
        if peer:
            label = f"LangGraph ({detail or 'value'}, ours ÷ theirs)"
            figures[ours_key].ratios[label] = ours / peer
            rows.append({"figure": what, "ours": ours, "langgraph": peer, "ratio": ours / peer})
    return rows


def _value(figures: dict[str, Figure], key: str) -> float | None:
    figure = figures.get(key)
    if figure is None or figure.status != MEASURED or figure.value is None:
        return None
    if isinstance(figure.value, float) and math.isnan(figure.value):
        return None
    return figure.value


def _ratio(
    figures: dict[str, Figure], key: str, baseline: str, label: str, *, faster: bool = False
) -> float | None:
    """value / baseline for rates; baseline / value (× faster) for latencies."""
    value, base = _value(figures, key), _value(figures, baseline)
    if value is None or base is None or value == 0 or base == 0:
        return None
    ratio = base / value if faster else value / base
    figures[key].ratios[label] = ratio
    return ratio


def _at_least(ratio: float | None, bound: float) -> bool | None:
    return None if ratio is None else ratio >= bound


def _p99_ok(figure: Figure, bound_ms: float) -> bool:
    p99 = figure.detail.get("p99_ms")
    return isinstance(p99, int | float) and p99 <= bound_ms


def evaluate(figures: dict[str, Figure]) -> None:
    """Compute every same-run ratio and whether each bar is met."""
    for key in ("writes_sequential_sqlite", "writes_first_subject_sqlite"):
        ratio = _ratio(figures, key, "raw_sqlite_full", "raw SQLite FULL")
        _ratio(figures, key, "raw_sqlite_normal", "raw SQLite NORMAL")
        _ratio(figures, key, "naive_writes_durable", "naive + fsync")
        _ratio(figures, key, "naive_writes", "naive (no fsync)")
        if key == "writes_sequential_sqlite":
            figures[key].met = _at_least(ratio, 0.5)
    concurrent = "writes_concurrent16_sqlite"
    ratio = _ratio(figures, concurrent, "writes_sequential_sqlite", "sequential SQLite")
    figures[concurrent].met = _at_least(ratio, 2.0)
    _ratio(figures, concurrent, "raw_sqlite_full", "raw SQLite FULL")
    _ratio(figures, concurrent, "naive_writes_durable", "naive + fsync")
    ratio = _ratio(figures, "writes_sequential_postgres", "raw_postgres", "raw PostgreSQL")
    figures["writes_sequential_postgres"].met = _at_least(ratio, 0.5)
    _ratio(figures, "writes_concurrent16_postgres", "writes_sequential_postgres", "sequential PG")
    _ratio(figures, "writes_concurrent16_postgres", "raw_postgres", "raw PostgreSQL")
    _file_parts(figures["file_sqlite"], figures["peer_file_sqlite"])
    _floor_ratios(figures["floor_writes_sqlite"], FLOOR_RATIOS["sqlite"])
    _floor_ratios(figures["floor_writes_postgres"], FLOOR_RATIOS["postgres"])
    for key, figure in figures.items():
        if key.startswith("search_scoped_n"):
            n = key.removeprefix("search_scoped_n")
            speedup = _ratio(figures, key, f"naive_search_n{n}", "faster than naive", faster=True)
            if int(n) == MILLION and figure.status == MEASURED:
                value = _value(figures, key)
                figure.met = value is not None and value <= 2.0 and bool(speedup and speedup >= 100)
    figures["search_scoped_postgres"].met = _p50_within(
        figures, "search_scoped_postgres", "peer_search_postgres"
    )
    single = figures["search_single_scope"]
    _ratio(figures, single.id, "naive_search_single_scope", "faster than naive", faster=True)
    single.met = _bound(single, lambda v: v <= 25.0)
    for key in ("rebuild_projection", "replay_fold"):
        _ratio(figures, key, "naive_reload", "naive reload")
        figures[key].met = _bound(figures[key], lambda v: v >= 50_000)
    rss = figures["rss_service"]
    _ratio(figures, rss.id, "rss_naive", "smaller than naive", faster=True)
    if rss.detail.get("stored") == MILLION:
        rss.met = _bound(rss, lambda v: v < 300)
    for workers in HTTP_WORKERS:
        for kind, floor in (("search", 1000.0), ("writes", 500.0)):
            key = http_key(kind, workers)
            figure = figures[key]
            _ratio(figures, key, http_key("ceiling", workers), "load generator ceiling")
            figure.met = _bound(figure, functools.partial(operator.le, floor))
            if figure.met is not None:
                figure.met = figure.met and _p99_ok(figure, 50.0)


#: The tables and indexes (dbstat's names) of the log, and of the search index.
LOG_TABLES = ("events", "sqlite_autoindex_events_")
SEARCH_TABLES = ("postings", "search_", "scopes", "sqlite_autoindex_scopes_")


def _file_parts(ours: Figure, theirs: Figure) -> None:
    """Parts of our file over LangGraph's whole file: the log alone, and everything but
    the search index (the log, the keys and the projection). Where either is over the
    file's bar, no smaller search index alone meets it."""
    tables, peer = ours.detail.get("tables_mib"), _bound(theirs, lambda v: v > 0)
    if ours.status != MEASURED or not isinstance(tables, dict) or not peer:
        return
    assert theirs.value is not None
    log = sum(mib for name, mib in tables.items() if name.startswith(LOG_TABLES))
    search = sum(mib for name, mib in tables.items() if name.startswith(SEARCH_TABLES))
    ours.ratios["LangGraph, our log's tables alone"] = log / theirs.value
    ours.ratios["LangGraph, all but our search index"] = (sum(tables.values()) - search) / (
        theirs.value
    )


#: A floor figure's ratios: (label, numerator side, denominator side), each side's
#: writes/s from the same turns (``bench.floor``).
FLOOR_RATIOS = {
    "sqlite": (
        ("raw SQLite FULL, same turns", "replay", "raw_full"),
        ("the service, same turns", "replay", "service"),
    ),
    "postgres": (
        ("LangGraph PostgresStore, same turns", "replay", "langgraph"),
        ("raw PostgreSQL, same turns", "replay", "raw_insert"),
        ("the service, same turns", "replay", "service"),
    ),
}


def _floor_ratios(figure: Figure, ratios: tuple[tuple[str, str, str], ...]) -> None:
    """The replay's rate over each rate measured in its turns (``bench.floor``): the
    most a write of this storage form reaches with no service Python before it. Where it
    is under a write bar's ratio, no cut of the service's Python alone meets that bar."""
    if figure.status != MEASURED:
        return
    for label, side, base in ratios:
        top, bottom = figure.detail.get(side), figure.detail.get(base)
        if isinstance(top, dict) and isinstance(bottom, dict) and bottom.get("per_second"):
            figure.ratios[label] = top["per_second"] / bottom["per_second"]


def _p50_within(figures: dict[str, Figure], key: str, peer: str) -> bool | None:
    """Whether the p50 of ``key`` is at most the p50 of ``peer`` (None unless both ran)."""
    if _value(figures, key) is None or _value(figures, peer) is None:
        return None
    ours, theirs = figures[key].detail.get("p50_ms"), figures[peer].detail.get("p50_ms")
    if not isinstance(ours, int | float) or not isinstance(theirs, int | float):
        return None
    return ours <= theirs


def _bound(figure: Figure, test: Callable[[float], bool]) -> bool | None:
    if figure.status != MEASURED or figure.value is None:
        return None
    return test(figure.value)
