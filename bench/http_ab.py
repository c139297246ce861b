"""Same-run A/B of the HTTP service: two source trees served in turn over one store.

``python -m bench.http_ab OLD_SRC NEW_SRC [--items N] [--requests R] [--clients C]
[--rounds K] [--workers W] [--data DIR] [--parts ceiling,search,write]``

One store of the first ``N`` workload items is loaded (with the code this process
imports), with one API key per tenant the clients act for, as :mod:`bench.httpserver`
does. Each round then serves the store with each source tree in turn (``gmem serve`` with
that tree first on ``PYTHONPATH``), alternating which goes first, and runs the
benchmark's load generator against it: the ``/health/live`` ceiling, ``R`` searches and
``R`` writes (the same new items each time, as every run serves a fresh copy of the
store) from ``C`` concurrent clients. Printed per round and
as medians over rounds: requests/s, p50 and p99, and the server's CPU per request
(user + system time of the server's processes, read from ``/proc``), which is steadier
than rates on a shared machine. ``--parts write`` measures the writes alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench import httpserver, loading
from bench.workload import Item, Workload

TICKS = os.sysconf("SC_CLK_TCK")
PARTS = ("ceiling", "search", "write")


def _cpu_seconds(pid: int) -> float:
    """User + system seconds of ``pid`` and its live descendants."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICKS
            for task in Path(f"/proc/{current}/task").iterdir():
                children = (task / "children").read_text().split()
                pending.extend(int(child) for child in children)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def _serve_once(
    src: str,
    data_dir: Path,
    workers: int,
    clients: tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]],
    parts: tuple[str, ...] = PARTS,
) -> dict[str, Any]:
    searches, writes, pings = clients
    os.environ["PYTHONPATH"] = src
    pids: list[int] = []
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="gmem-http-ab-run-") as scratch:
        copy = Path(scratch) / "store"
        shutil.copytree(data_dir, copy)  # every run starts from the same store
        with httpserver.serving(copy, workers, pids) as url:
            httpserver.load(url, [{"requests": ping["requests"][:20]} for ping in pings])
            specs = {"ceiling": pings, "search": searches, "write": writes}
            for name in parts:
                spec = specs[name]
                before = _cpu_seconds(pids[0])
                summary = httpserver.load(url, spec)
                cpu = _cpu_seconds(pids[0]) - before
                summary["cpu_ms"] = cpu * 1000 / summary["requests"]
                results[name] = summary
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=4_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--data", type=Path, default=None, help="reuse (or fill) this store")
    parser.add_argument(
        "--parts", default=",".join(PARTS), help="which loads to run (comma-separated)"
    )
    args = parser.parse_args()
    asked = set(args.parts.split(","))
    if not asked or asked - set(PARTS):
        parser.error(f"--parts: a comma-separated choice of {', '.join(PARTS)}")
    parts = tuple(part for part in PARTS if part in asked)
    workload = Workload()
    data_dir = args.data or Path(tempfile.mkdtemp(prefix="gmem-http-ab-"))
    loading.ensure(data_dir, workload, args.items, 2, None)
    by_tenant: dict[str, list[Item]] = {}
    for item in workload.items(0, args.items):
        by_tenant.setdefault(item.tenant_id, []).append(item)
    tenants = sorted(by_tenant, key=lambda t: (-len(by_tenant[t]), t))
    keys = {t: httpserver.create_key(data_dir, t) for t in tenants[: httpserver.KEY_TENANTS]}
    share = max(1, args.requests // args.clients)
    sources = {"old": str(Path(args.old).resolve()), "new": str(Path(args.new).resolve())}
    rows: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    # The same new items in every run: each run writes into its own copy of the store.
    clients = httpserver.client_requests(workload, by_tenant, keys, args.clients, share, 80_000_000)
    for number in range(args.rounds):
        order = ("old", "new") if number % 2 == 0 else ("new", "old")
        for name in order:
            result = _serve_once(sources[name], data_dir, args.workers, clients, parts)
            rows[name].append(result)
            print(json.dumps({"round": number, "src": name, **_line(result)}), flush=True)
    print("medians over rounds (old -> new, ratio new/old):")
    for part in parts:
        for measure in ("per_s", "p50_ms", "p99_ms", "cpu_ms"):
            old = statistics.median(r[part][measure] for r in rows["old"])
            new = statistics.median(r[part][measure] for r in rows["new"])
            print(f"  {part:8} {measure:7} {old:9.2f} -> {new:9.2f}  ({new / old:.2f}x)")


def _line(result: dict[str, Any]) -> dict[str, Any]:
    return {
        part: {
            "per_s": round(result[part]["per_s"]),
            "p50": round(result[part]["p50_ms"], 2),
            "p99": round(result[part]["p99_ms"], 2),
            "cpu_ms": round(result[part]["cpu_ms"], 3),
            "statuses": result[part]["statuses"],
        }
        for part in PARTS
        if part in result
    }


if __name__ == "__main__":
    main()
