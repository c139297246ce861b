"""The scoped-search bar on one host, without a whole preset: ours and the naive scan, same run.

    python -m bench.scoped_ratio DATA_DIR [--items N] [--queries Q] [--naive-queries K]
    [--rounds R]

``DATA_DIR`` holds a store of the scoped workload loaded before (``bench.loading``, as the
presets load it; its ``bench-state.json`` says how many items). The naive baseline is
given the same first ``N`` items (in memory, as the preset holds it while our searches
run), then each round times ``Q`` of the preset's queries on our store (its file read into
the page cache first, as the preset does) and the naive scan over the first ``K`` of them.
One JSON line a round: both latency summaries and the naive p95 over ours (the SPEC §12
bar at 1M: at least 100, with our p95 at most 2 ms). The full preset's defaults.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench import inprocess
from bench.loading import loaded
from bench.naive import NaiveMemory
from bench.presets import PRESETS
from bench.workload import Workload
from governed_memory.bootstrap import open_service
from governed_memory.cli.options import positive_count
from governed_memory.store.sqlite.store import DATABASE_FILE


def main(argv: list[str] | None = None) -> int:
    full = PRESETS["full"]
    parser = argparse.ArgumentParser(prog="python -m bench.scoped_ratio", description=__doc__)
    parser.add_argument("data_dir", type=Path, help="a loaded store of the scoped workload")
    parser.add_argument("--items", type=int, default=None, help="default: every item loaded")
    parser.add_argument("--queries", type=positive_count, default=full.queries)
    parser.add_argument("--naive-queries", type=positive_count, default=full.naive_queries)
    parser.add_argument("--rounds", type=positive_count, default=1)
    args = parser.parse_args(argv)
    stored = loaded(args.data_dir)
    if stored == 0:
        parser.error(f"no loaded store in {args.data_dir} (bench.loading writes one)")
    items = stored if args.items is None else args.items
    if not 0 < items <= stored:
        parser.error(f"--items must be between 1 and the {stored:,} items loaded")
    workload = Workload()
    queries, warmup = inprocess.search_queries(workload, items, args.queries)
    with tempfile.TemporaryDirectory() as scratch:
        naive = NaiveMemory(Path(scratch) / "naive.jsonl")
        for item in workload.items(0, items):
            naive.write(item.tenant_id, item.body(), log=False)
        for number in range(args.rounds):
            service = open_service(data_dir=args.data_dir, synchronous="FULL")
            try:
                paged = inprocess.page_in(args.data_dir / DATABASE_FILE)
                ours = inprocess.service_search(service, queries, warmup)
            finally:
                service.store.close()
            theirs = inprocess.naive_search(naive, queries[: args.naive_queries])
            line = {
                "round": number,
                "items": items,
                "ours_ms": _rounded(ours),
                "naive_ms": _rounded(theirs),
                "naive_p95_over_ours": round(theirs["p95_ms"] / ours["p95_ms"], 1),
                "paged_in_mib": round(paged["paged_in_mib"], 1),
            }
            print(json.dumps(line), flush=True)
    return 0


def _rounded(summary: dict[str, float]) -> dict[str, float]:
    return {key: round(summary[key], 3) for key in ("p50_ms", "p95_ms", "p99_ms", "mean_ms")}


if __name__ == "__main__":
    raise SystemExit(main())
