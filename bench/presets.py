"""How much each preset measures. quick: a few minutes, with the 100k-item single scope
and a 10k-item PostgreSQL store searched beside LangGraph's; full: adds 1M."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    sizes: tuple[int, ...]  # scoped-search store sizes, loaded incrementally
    single_scope: int  # items in the one-scope store (0: not measured)
    postgres_search: int  # items in the PostgreSQL search store (0: not measured)
    queries: int  # timed service searches per size
    naive_queries: int  # timed naive scans per size (each scans every item)
    writes: int  # sequential durable writes (service, naive)
    concurrent_writes: int  # writes shared by the 16 writer threads
    raw_rows: int  # single-row commits per raw limit
    rebuild_cap: int  # events replayed by the fold-only figure
    rebuild_seconds: float  # the rebuild (of the whole largest store) stops after this
    http_requests: int  # requests per HTTP figure
    http_store: int  # items preloaded into the HTTP server's store
    loaders: int  # loading processes
    writers: int = 16
    http_workers: tuple[int, ...] = (1, 2, 4)  # gmem serve --workers N, one round each


PRESETS = {
    "smoke": Preset(
        name="smoke",
        sizes=(300, 1_000),
        single_scope=500,
        postgres_search=300,
        queries=50,
        naive_queries=10,
        writes=40,
        concurrent_writes=64,
        raw_rows=50,
        rebuild_cap=1_000,
        rebuild_seconds=60,
        http_requests=64,
        http_store=200,
        loaders=1,
        http_workers=(1, 2),
    ),
    "quick": Preset(
        name="quick",
        sizes=(10_000, 100_000),
        single_scope=100_000,
        postgres_search=10_000,
        queries=2_000,
        naive_queries=100,
        writes=1_500,
        concurrent_writes=3_200,
        raw_rows=3_000,
        rebuild_cap=100_000,
        rebuild_seconds=60,
        http_requests=4_000,
        http_store=10_000,
        loaders=2,
    ),
    "full": Preset(
        name="full",
        sizes=(10_000, 100_000, 1_000_000),
        single_scope=100_000,
        postgres_search=10_000,
        queries=3_000,
        naive_queries=30,
        writes=3_000,
        concurrent_writes=6_400,
        raw_rows=5_000,
        rebuild_cap=200_000,
        rebuild_seconds=300,
        http_requests=10_000,
        http_store=10_000,
        loaders=2,
    ),
}
