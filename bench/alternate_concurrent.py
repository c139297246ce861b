"""Same-run A/B of concurrent durable writes: two source trees, one after the other, in
rounds.

``python -m bench.alternate_concurrent OLD_SRC NEW_SRC [--writes N] [--threads T]
[--rounds K] [--backend sqlite|postgres]``

Each round runs, for each tree in turn (which goes first alternates), a child process with
that tree first on ``sys.path``: it opens a fresh store (SQLite at ``synchronous=FULL`` in
a temporary folder; PostgreSQL in a schema of its own, ``bench.raw.postgres_dsn``), gives
every subject its key, then has ``T`` threads make ``N`` writes between them (the items of
``bench.inprocess.concurrent_writes``), timing each write. Printed per run and as medians
over rounds: writes/s, the writes' p50 and p99 latency, and process CPU a write.
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
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import postgres
from bench.inprocess import CONCURRENT_OFFSET, first_writes
from bench.loading import writer
from bench.raw import postgres_dsn
from bench.workload import Workload
from governed_memory import open_service
from governed_memory.service import MemoryService

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def _fresh_service(backend: str) -> Iterator[MemoryService]:
    """A service over a fresh store of ``backend``, gone afterwards."""
    if backend == "postgres":
        with postgres.fresh_service(postgres_dsn()) as service:
            yield service
        return
    with tempfile.TemporaryDirectory(prefix="gmem-conc-ab-") as scratch:
        service = open_service(data_dir=Path(scratch), synchronous="FULL")
        try:
            yield service
        finally:
            service.close()


def _child(backend: str, writes: int, threads: int) -> dict[str, Any]:
    """One tree's run (in a child process): the figures of ``threads`` concurrent writers."""
    items = Workload().items(CONCURRENT_OFFSET, CONCURRENT_OFFSET + writes)
    shares = [
        [(writer(item.tenant_id), item.body()) for item in items[k::threads]]
        for k in range(threads)
    ]
    latencies: list[float] = []
    gate = threading.Barrier(threads + 1)
    with _fresh_service(backend) as service:
        first_writes(service, items)

        def run(share: list[tuple[Any, dict[str, Any]]]) -> None:
            gate.wait()
            for principal, body in share:
                began = time.perf_counter()
                service.write(principal, body)
                latencies.append(time.perf_counter() - began)

        workers = [threading.Thread(target=run, args=(share,)) for share in shares]
        for thread in workers:
            thread.start()
        cpu = time.process_time()
        gate.wait()
        started = time.perf_counter()
        for thread in workers:
            thread.join()
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu
    if len(latencies) != len(items):
        raise SystemExit("a writer failed")
    latencies.sort()
    return {
        "per_s": len(latencies) / seconds,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
        "cpu_ms": cpu * 1000 / len(latencies),
    }


def _run(src: str, backend: str, writes: int, threads: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(ROOT)])}
    command = [sys.executable, "-m", "bench.alternate_concurrent", "--child", backend]
    done = subprocess.run(
        [*command, str(writes), str(threads)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=ROOT,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="the src folder of the old code")
    parser.add_argument("new", help="the src folder of the new code")
    parser.add_argument("--writes", type=int, default=3_200)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    args = parser.parse_args()
    if args.threads < 1 or args.writes < args.threads or args.rounds < 1:
        parser.error("--threads, --rounds: at least 1; --writes: at least one per thread")
    for name in (args.old, args.new):
        if not (Path(name) / "governed_memory").is_dir():
            parser.error(f"{name}: not a src folder holding governed_memory")
    sources = {"old": str(Path(args.old).resolve()), "new": str(Path(args.new).resolve())}
    rows: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for number in range(args.rounds):
        order = ("old", "new") if number % 2 == 0 else ("new", "old")
        for name in order:
            result = _run(sources[name], args.backend, args.writes, args.threads)
            rows[name].append(result)
            shown = {k: round(v, 3) for k, v in result.items()}
            print(json.dumps({"round": number, "src": name, **shown}), flush=True)
    print("medians over rounds (old -> new, ratio new/old):")
    for measure in ("per_s", "p50_ms", "p99_ms", "cpu_ms"):
        old = statistics.median(r[measure] for r in rows["old"])
        new = statistics.median(r[measure] for r in rows["new"])
        print(f"  {measure:7} {old:9.2f} -> {new:9.2f}  ({new / old:.2f}x)")


if __name__ == "__main__":
    main()
