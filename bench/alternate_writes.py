"""Same-run A/B of sequential durable writes: two source trees in lockstep, one writer.

``python -m bench.alternate_writes OLD_SRC NEW_SRC [--writes N] [--chunk C]
[--backend sqlite|postgres|both] [--peer]``

For each backend, two child processes, each with one source tree first on ``sys.path``,
open a fresh store (SQLite at ``synchronous=FULL``; PostgreSQL in a schema of its own at
the server's settings, ``bench.raw.postgres_dsn``) and give every subject its key. They
then take turns, ``C`` sequential ``MemoryService.write`` calls at a time (the order
swapped every turn), until each has made ``N``: the writes of ``bench.inprocess
.sequential_writes`` (warm subjects, a trusted writer, new items). Turns of a fraction of
a second put both trees under the same load of a shared machine. Printed: each tree's
writes/s and process CPU a write, and new ÷ old over all turns and as the median of the
turns' paired ratios. ``--peer`` adds LangGraph's ``PostgresStore`` puts (``bench.peer``)
as a third writer taking turns on PostgreSQL, and each tree's ratio to it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OFFSET = 50_000_000  # bench.inprocess.SEQUENTIAL_OFFSET: ids beyond any loaded range


def _serve(backend: str, count: int) -> None:
    """One source tree's writer (a child process): opens a fresh store, gives every
    subject its key, then on each line ``N`` of stdin makes its next ``N`` sequential
    writes and prints their wall and process CPU seconds as JSON; ``q`` ends it."""
    from bench.inprocess import first_writes
    from bench.loading import writer
    from bench.workload import Workload

    items = Workload().items(OFFSET, OFFSET + count)
    if backend == "langgraph":
        _serve_peer(items)
        return
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            from governed_memory.bootstrap import open_service

            scratch = stack.enter_context(tempfile.TemporaryDirectory())
            service = open_service(data_dir=scratch, synchronous="FULL")
            stack.callback(service.store.close)
        else:
            from bench.postgres import fresh_service
            from bench.raw import postgres_dsn

            service = stack.enter_context(fresh_service(postgres_dsn()))
        first_writes(service, items)  # every subject's key exists, as in the benchmark
        bodies = iter([(writer(item.tenant_id), item.body()) for item in items])
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "q":
                break
            chunk = [next(bodies) for _ in range(int(line))]
            cpu, wall = time.process_time(), time.perf_counter()
            for principal, body in chunk:
                service.write(principal, body)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(json.dumps({"wall": wall, "cpu": cpu}), flush=True)


def _serve_peer(items: list[Any]) -> None:
    """:func:`_serve` for LangGraph's ``PostgresStore``: one ``put`` a write (each its own
    autocommitted upsert), as ``bench.peer.sequential_puts`` times them."""
    from bench import peer
    from bench.raw import postgres_dsn

    with peer.postgres_store(postgres_dsn()) as store:
        work = iter([(peer.namespace(item), item.memory_id, peer.value(item)) for item in items])
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "q":
                break
            chunk = [next(work) for _ in range(int(line))]
            cpu, wall = time.process_time(), time.perf_counter()
            for namespace, key, value in chunk:
                store.put(namespace, key, value)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(json.dumps({"wall": wall, "cpu": cpu}), flush=True)


class _Writer:
    """A child process writing with one source tree, driven chunk by chunk."""

    def __init__(self, source: str, backend: str, count: int) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([source, str(ROOT)]))
        arguments = [backend, "-", "--serve", "--writes", str(count)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.alternate_writes", *arguments],
            env=env,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ready(self) -> None:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"a writer failed to start (exit {self.process.wait()})")

    def writes(self, count: int) -> dict[str, float]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{count}\n")
        self.process.stdin.flush()
        result: dict[str, float] = json.loads(self.process.stdout.readline())
        return result

    def close(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.write("q\n")
                self.process.stdin.close()
        self.process.wait()


def alternate(old: str, new: str, count: int, chunk: int, backends: list[str], peer: bool) -> None:
    trees = {"old": old, "new": new}
    for backend in backends:
        writers = {name: _Writer(source, backend, count) for name, source in trees.items()}
        if peer and backend == "postgres":  # LangGraph's puts take their turns too
            writers["langgraph"] = _Writer(new, "langgraph", count)
        try:
            for writer in writers.values():
                writer.ready()
            chunks: dict[str, list[dict[str, float]]] = {name: [] for name in writers}
            for number in range(count // chunk):
                order = list(writers) if number % 2 == 0 else list(reversed(writers))
                for name in order:
                    chunks[name].append(writers[name].writes(chunk))
        finally:
            for writer in writers.values():
                writer.close()
        total = {
            name: {k: sum(c[k] for c in done) for k in ("wall", "cpu")}
            for name, done in chunks.items()
        }
        done = len(chunks["old"]) * chunk
        for name in writers:
            print(
                f"{backend} {name}: {done / total[name]['wall']:.0f} writes/s,"
                f" {total[name]['cpu'] * 1000 / done:.3f} ms CPU a write"
            )
        for k, label in (("wall", "wall time"), ("cpu", "CPU")):
            paired = statistics.median(
                b[k] / a[k] for a, b in zip(chunks["old"], chunks["new"], strict=True)
            )
            print(
                f"{backend} {label} new ÷ old: {total['new'][k] / total['old'][k]:.3f} in all,"
                f" median of {len(chunks['old'])} paired chunks {paired:.3f}",
                flush=True,
            )
        if "langgraph" in total:
            for name in trees:
                print(
                    f"{backend} {name} ÷ langgraph writes/s:"
                    f" {total['langgraph']['wall'] / total[name]['wall']:.3f}",
                    flush=True,
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.alternate_writes", description=__doc__)
    parser.add_argument("old", help="the src folder of the old code (or --serve's backend)")
    parser.add_argument("new", help="the src folder of the new code")
    parser.add_argument("--writes", type=int, default=3_000, help="writes by each tree")
    parser.add_argument("--chunk", type=int, default=50, help="writes a turn")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument(
        "--peer", action="store_true", help="LangGraph's PostgresStore puts take turns too"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        _serve(args.old, args.writes)
    else:
        backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
        alternate(args.old, args.new, args.writes, args.chunk, backends, args.peer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
