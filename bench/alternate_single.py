"""Same-run A/B of SQLite search in one loaded store, two source trees alternated per query.

``python -m bench.alternate_single OLD_SRC NEW_SRC DATA_DIR [--items N] [--queries Q]
[--rounds R] [--slowest K] [--new-data-dir DIR] [--scoped] [--cold]``

``DATA_DIR`` holds a loaded store (``bench.loading``; the 100k single scope is
``Workload(single_scope=True)``, its first ``N`` items). Two processes serve searches over
it, each with one source tree first on ``sys.path``; after the warm-up queries, every
round sends each timed query to both, one after the other, which goes first alternating
query by query, so both see the same machine at nearly the same instant. Each search is
timed inside its process (wall and CPU). Printed: per-query minimum over rounds (p50,
p95, p99), all samples' p95, ratios, each process's resident memory at the end, the
``K`` queries slowest for the old tree, and whether every query returned the same ids
and scores (exactly) in both. ``--new-data-dir`` gives the new tree a store of its own
(the same items loaded by the new tree, when the two store them in different forms: the
scores may then differ by the loads' instants); ``--scoped`` searches a store of the
scoped workload (``Workload()``) instead of the single scope. ``--cold``: before each
timed search, each process moves every scope's generation (as any write to the scope
does, without changing what it holds), so nothing kept per generation (the lists' heads,
tiers and document frequencies) serves the search: a scope written between every two
searches.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent


class _FixedClock:
    """One instant for both trees, so that equal rankings give equal scores."""

    def __init__(self, now: datetime) -> None:
        self.instant = now

    def now(self) -> datetime:
        return self.instant


def _serve(data_dir: str, now: str, items: int, count: int, scoped: bool, cold: bool) -> None:
    """The child: answer ``index`` lines with the query's timings and hits (JSON lines)."""
    from bench.inprocess import search_queries
    from bench.loading import writer
    from bench.stats import peak_rss_mib
    from bench.workload import Workload
    from governed_memory.bootstrap import open_service

    clock = _FixedClock(datetime.fromisoformat(now))
    service = open_service(data_dir=data_dir, synchronous="FULL", clock=clock)
    queries, warmup = search_queries(Workload(single_scope=not scoped), items, count)
    for query in warmup:
        service.search(writer(query.tenant_id), query.body())
    writer_db = sqlite3.connect(Path(data_dir) / "gmem.sqlite3", isolation_level=None)
    writer_db.execute("PRAGMA busy_timeout = 10000")
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip() == "rss":
            status = Path("/proc/self/status").read_text().splitlines()
            rss = next(int(s.split()[1]) / 1024 for s in status if s.startswith("VmRSS:"))
            heads = getattr(getattr(service.store, "_search", None), "heads", None)
            held = getattr(heads, "held", None)  # postings kept in memory (new trees)
            answer = {"rss_mib": rss, "peak_mib": peak_rss_mib(), "held": held}
            print(json.dumps(answer), flush=True)
            continue
        query = queries[int(line)]
        if cold:  # a write to the scope: every cache of its generation is stale
            writer_db.execute("UPDATE scopes SET generation = generation + 1")
        wall, cpu = time.perf_counter(), time.process_time()
        found = service.search(writer(query.tenant_id), query.body()).items
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        hits = [[hit.item.id, hit.score] for hit in found]
        print(json.dumps({"wall": wall, "cpu": cpu, "hits": hits}), flush=True)
    writer_db.close()
    service.store.close()


class _Child:
    def __init__(
        self,
        source: str,
        data_dir: str,
        now: str,
        items: int,
        count: int,
        scoped: bool,
        cold: bool,
    ) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([source, str(ROOT)]))
        arguments = [data_dir, now, "-", "--items", str(items), "--queries", str(count)]
        arguments += ["--scoped"] if scoped else []
        arguments += ["--cold"] if cold else []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.alternate_single", "--child", *arguments],
            env=env,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.ready = False

    def ask(self, line: str) -> dict[str, Any]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        if not self.ready:
            self.ready = json.loads(stdout.readline())["ready"]
        stdin.write(line + "\n")
        stdin.flush()
        answer: dict[str, Any] = json.loads(stdout.readline())
        return answer

    def close(self) -> None:
        stdin: IO[str] | None = self.process.stdin
        if stdin is not None:
            stdin.close()
        self.process.wait()


def _percentiles(values: list[float]) -> tuple[float, float, float]:
    from bench.stats import percentile

    ordered = sorted(values)
    return tuple(percentile(ordered, f) * 1000 for f in (0.5, 0.95, 0.99))  # type: ignore[return-value]


def alternate(
    old: str,
    new: str,
    data_dirs: tuple[str, str],
    items: int,
    count: int,
    rounds: int,
    k: int,
    scoped: bool = False,
    cold: bool = False,
) -> None:
    now = datetime.now(UTC).isoformat()
    children = {
        name: _Child(tree, data_dir, now, items, count, scoped, cold)
        for name, tree, data_dir in (("old", old, data_dirs[0]), ("new", new, data_dirs[1]))
    }
    samples: dict[str, dict[str, list[list[float]]]] = {
        name: {"wall": [[] for _ in range(count)], "cpu": [[] for _ in range(count)]}
        for name in children
    }
    differ: list[int] = []
    try:
        for number in range(rounds):
            for index in range(count):
                order = ("old", "new") if (index + number) % 2 == 0 else ("new", "old")
                hits = {}
                for name in order:
                    answer = children[name].ask(str(index))
                    samples[name]["wall"][index].append(answer["wall"])
                    samples[name]["cpu"][index].append(answer["cpu"])
                    hits[name] = answer["hits"]
                if hits["old"] != hits["new"] and index not in differ:
                    differ.append(index)
            print(f"round {number} done", flush=True)
        memory = {name: child.ask("rss") for name, child in children.items()}
    finally:
        for child in children.values():
            child.close()
    for number in range(rounds):
        shown = []
        for name in children:
            p50, p95, p99 = _percentiles([s[number] for s in samples[name]["wall"]])
            shown.append(f"{name} p50 {p50:.2f} p95 {p95:.2f} p99 {p99:.2f}")
        print(f"round {number} wall: " + "; ".join(shown))
    for clock in ("wall", "cpu"):
        figures = {}
        for name in children:
            per_query = samples[name][clock]
            minimum = _percentiles([min(s) for s in per_query])
            every = _percentiles([v for s in per_query for v in s])
            figures[name] = (*minimum, every[1])
        labels = ("per-query min p50", "p95", "p99", "all-samples p95")
        for i, label in enumerate(labels):
            o, n = figures["old"][i], figures["new"][i]
            print(f"{clock} {label}: old {o:.2f} ms, new {n:.2f} ms, new ÷ old {n / o:.2f}")
    for name, rss in memory.items():
        held = f", {rss['held']} postings held" if rss.get("held") is not None else ""
        print(f"{name} RSS {rss['rss_mib']:.1f} MiB (peak {rss['peak_mib']:.1f}){held}")
    slowest = sorted(range(count), key=lambda i: -min(samples["old"]["wall"][i]))[:k]
    for i in slowest:
        o, n = min(samples["old"]["wall"][i]) * 1000, min(samples["new"]["wall"][i]) * 1000
        print(f"query {i}: old {o:.1f} ms, new {n:.1f} ms")
    print("identical ids and scores for every query" if not differ else f"DIFFER: {differ}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.alternate_single", description=__doc__)
    parser.add_argument("old", help="the src folder of the old code (--child: the store)")
    parser.add_argument("new", help="the src folder of the new code (--child: the instant)")
    parser.add_argument("data_dir", help="a loaded single-scope store")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slowest", type=int, default=10)
    parser.add_argument("--new-data-dir", default=None, help="the new tree's own store")
    parser.add_argument("--scoped", action="store_true", help="a store of Workload()")
    parser.add_argument("--cold", action="store_true", help="a write before each search")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _serve(args.old, args.new, args.items, args.queries, args.scoped, args.cold)
    else:
        dirs = (args.data_dir, args.new_data_dir or args.data_dir)
        alternate(
            args.old,
            args.new,
            dirs,
            args.items,
            args.queries,
            args.rounds,
            args.slowest,
            args.scoped,
            args.cold,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
