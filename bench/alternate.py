"""Same-run A/B of PostgreSQL scoped search: two source trees alternated on one store.

``python -m bench.alternate OLD_SRC NEW_SRC [--items N] [--queries Q] [--rounds R]``

One store of the first ``N`` workload items is loaded (with NEW_SRC's code, as the
benchmark loads), and LangGraph's ``PostgresStore`` with the same items. Each round then
runs ``Q`` timed searches (after the warm-up queries) with each source tree, in a process
of its own with that tree first on ``sys.path``, alternating which goes first, and the
peer's fetch-and-rank in this process. Printed per round and as medians over rounds:
p50, p95 and client CPU per search, ratios, and a digest of every query's hit ids (equal
digests: identical results). Both schemas are dropped at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _round(schema: str, key_file: str, items: int, count: int) -> None:
    """One source tree's searches over the loaded store (run in a child process)."""
    from bench.inprocess import search_queries
    from bench.loading import writer
    from bench.raw import postgres_dsn
    from bench.stats import latency_summary, timed_calls
    from bench.workload import Query, Workload
    from governed_memory.crypto import Keyring
    from governed_memory.service import MemoryService
    from governed_memory.store.postgres import PostgresStore

    store = PostgresStore(postgres_dsn(), schema=schema)
    service = MemoryService(store, Keyring(Path(key_file).read_bytes()))
    queries, warmup = search_queries(Workload(), items, count)
    hits: list[list[str]] = []

    def call(query: Query) -> None:
        found = service.search(writer(query.tenant_id), query.body()).items
        hits.append([hit.item.id for hit in found])

    try:
        timed_calls(call, warmup)
        hits.clear()
        cpu = time.process_time()
        summary = latency_summary(timed_calls(call, queries))
        summary["cpu_ms"] = (time.process_time() - cpu) * 1000 / len(queries)
    finally:
        store.close()
    summary["digest"] = hashlib.sha256(json.dumps(hits).encode()).hexdigest()[:12]
    print(json.dumps(summary))


def _child(source: str, schema: str, key_file: str, items: int, count: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([source, str(ROOT)]))
    arguments = ["--child", schema, key_file, "--items", str(items), "--queries", str(count)]
    from bench.rss import run_module

    return run_module("bench.alternate", arguments, env=env, cwd=ROOT)


def _show(label: str, summary: dict[str, Any]) -> None:
    shown = {k: summary[k] for k in ("p50_ms", "p95_ms", "cpu_ms") if k in summary}
    digest = summary.get("digest", "")
    print(label, " ".join(f"{k} {v:.3f}" for k, v in shown.items()), digest, flush=True)


def alternate(old: str, new: str, items: int, count: int, rounds: int) -> None:
    from bench import peer
    from bench.inprocess import search_queries
    from bench.postgres import loaded_service
    from bench.raw import postgres_dsn
    from bench.workload import Workload

    dsn, workload = postgres_dsn(), Workload()
    key = secrets.token_bytes(32)
    with (
        tempfile.TemporaryDirectory() as scratch,
        loaded_service(dsn, workload, items, 16, key) as (service, _),
        peer.postgres_store(dsn) as theirs,
    ):
        key_file = Path(scratch) / "master.key"
        key_file.write_bytes(key)
        schema = service.store.schema  # a PostgresStore
        peer.load(theirs, workload, 0, items)
        queries, warmup = search_queries(workload, items, count)
        runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": [], "langgraph": []}
        trees = {"old": old, "new": new}
        for number in range(rounds):
            for name in ("old", "new") if number % 2 == 0 else ("new", "old"):
                runs[name].append(_child(trees[name], schema, str(key_file), items, count))
                _show(f"round {number} {name}", runs[name][-1])
            cpu = time.process_time()
            runs["langgraph"].append(peer.searches(theirs, queries, warmup))
            spent = (time.process_time() - cpu) * 1000 / (len(queries) + len(warmup))
            runs["langgraph"][-1]["cpu_ms"] = spent
            _show(f"round {number} langgraph", runs["langgraph"][-1])
    for metric in ("p50_ms", "p95_ms", "cpu_ms"):
        median = {name: statistics.median(r[metric] for r in done) for name, done in runs.items()}
        print(
            f"median {metric}: "
            + ", ".join(f"{name} {value:.3f}" for name, value in median.items())
            + f"; new ÷ old {median['new'] / median['old']:.2f}"
            + f"; old ÷ langgraph {median['old'] / median['langgraph']:.2f}"
            + f"; new ÷ langgraph {median['new'] / median['langgraph']:.2f}"
        )
    same = {r["digest"] for r in runs["old"] + runs["new"]}
    print("identical hits in every round" if len(same) == 1 else f"HITS DIFFER: {same}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.alternate", description=__doc__)
    parser.add_argument("old", help="the src folder of the old code (or --child's schema)")
    parser.add_argument("new", help="the src folder of the new code (or --child's key file)")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _round(args.old, args.new, args.items, args.queries)
    else:
        alternate(args.old, args.new, args.items, args.queries, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
