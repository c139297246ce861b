"""Same-run A/B of sequential durable writes: two source trees alternated, one writer.

``python -m bench.alternate_writes OLD_SRC NEW_SRC [--writes N] [--rounds R]
[--backend sqlite|postgres|both]``

Each round runs, for each backend, ``N`` sequential ``MemoryService.write`` calls the way
the benchmark issues them (``bench.inprocess.sequential_writes``: warm subjects, trusted
writer, new items) with each source tree, in a process of its own with that tree first on
``sys.path``, alternating which goes first. SQLite: a fresh store at ``synchronous=FULL``;
PostgreSQL: a fresh schema at the server's settings (``bench.raw.postgres_dsn``). Printed
per round and as medians over rounds: writes/s and the writer's process CPU per write.
``--profile FILE`` (with ``--child``) writes a cProfile of the timed writes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OFFSET = 50_000_000  # bench.inprocess.SEQUENTIAL_OFFSET: ids beyond any loaded range


def _timed(service: Any, count: int, profile: str | None) -> dict[str, float]:
    from bench.inprocess import first_writes
    from bench.loading import writer
    from bench.workload import Workload

    items = Workload().items(OFFSET, OFFSET + count)
    first_writes(service, items)  # every subject's key exists, as in the benchmark
    bodies = [(writer(item.tenant_id), item.body()) for item in items]
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    cpu, wall = time.process_time(), time.perf_counter()
    for principal, body in bodies:
        service.write(principal, body)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    return {"writes_per_s": count / wall, "cpu_ms": cpu * 1000 / count}


def _round(backend: str, count: int, profile: str | None) -> None:
    """One source tree's sequential writes on a fresh store (run in a child process)."""
    if backend == "sqlite":
        from governed_memory.bootstrap import open_service

        with tempfile.TemporaryDirectory() as scratch:
            service = open_service(data_dir=scratch, synchronous="FULL")
            try:
                print(json.dumps(_timed(service, count, profile)))
            finally:
                service.store.close()
    else:
        from bench.postgres import fresh_service
        from bench.raw import postgres_dsn

        with fresh_service(postgres_dsn()) as service:
            print(json.dumps(_timed(service, count, profile)))


def _child(source: str, backend: str, count: int) -> dict[str, Any]:
    from bench.rss import run_module

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([source, str(ROOT)]))
    arguments = ["--child", backend, "-", "--writes", str(count)]
    return run_module("bench.alternate_writes", arguments, env=env, cwd=ROOT)


def alternate(old: str, new: str, count: int, rounds: int, backends: list[str]) -> None:
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    trees = {"old": old, "new": new}
    for number in range(rounds):
        for backend in backends:
            for name in ("old", "new") if number % 2 == 0 else ("new", "old"):
                result = _child(trees[name], backend, count)
                runs.setdefault((backend, name), []).append(result)
                print(
                    f"round {number} {backend} {name}: {result['writes_per_s']:.0f} writes/s,"
                    f" {result['cpu_ms']:.3f} ms CPU a write",
                    flush=True,
                )
    for backend in backends:
        for metric in ("writes_per_s", "cpu_ms"):
            old_runs, new_runs = runs[(backend, "old")], runs[(backend, "new")]
            median = {n: statistics.median(r[metric] for r in runs[(backend, n)]) for n in trees}
            # Each round's ratio: the two trees ran back to back, so a load that drifts
            # over the run (other processes on the machine) cancels out of it.
            paired = statistics.median(
                b[metric] / a[metric] for a, b in zip(old_runs, new_runs, strict=True)
            )
            print(
                f"{backend} median {metric}: old {median['old']:.3f}, new {median['new']:.3f};"
                f" new ÷ old {median['new'] / median['old']:.3f}; median of paired ratios"
                f" {paired:.3f}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.alternate_writes", description=__doc__)
    parser.add_argument("old", help="the src folder of the old code (or --child's backend)")
    parser.add_argument("new", help="the src folder of the new code")
    parser.add_argument("--writes", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--profile", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _round(args.old, args.writes, args.profile)
    else:
        backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
        alternate(args.old, args.new, args.writes, args.rounds, backends)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
