"""Resident memory of a serving process, measured in a process of its own.

``python -m bench.rss service DATA_DIR STORED QUERIES`` opens the store as the service
would (``synchronous=FULL``), serves ``QUERIES`` workload searches and prints the peak
RSS as JSON. ``python -m bench.rss naive STORED QUERIES`` does the same for the naive
baseline holding ``STORED`` items in its dict; ``python -m bench.rss langgraph PATH STORED
QUERIES`` for LangGraph's ``SqliteStore`` at ``PATH`` (bench/peer.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.stats import current_rss_mib, peak_rss_mib


def _service(data_dir: str, stored: int, queries: int) -> dict[str, Any]:
    from bench.inprocess import service_search
    from bench.workload import Workload
    from governed_memory.bootstrap import open_service

    workload = Workload()
    batch = workload.queries(queries, stored)
    baseline = current_rss_mib()
    service = open_service(data_dir=data_dir, synchronous="FULL")
    opened = current_rss_mib()
    summary = service_search(service, batch, batch[:10])
    return _served(baseline, opened, len(batch), summary)


def _naive(stored: int, queries: int) -> dict[str, Any]:
    from bench.inprocess import naive_search
    from bench.naive import NaiveMemory
    from bench.workload import Workload

    workload = Workload()
    baseline = current_rss_mib()
    with tempfile.TemporaryDirectory() as scratch:
        naive = NaiveMemory(Path(scratch) / "log.jsonl")
        for index in range(stored):
            item = workload.item(index)
            naive.write(item.tenant_id, item.body(), log=False)
        opened = current_rss_mib()
        naive_search(naive, workload.queries(queries, stored))
    return {
        "interpreter_mib": baseline,
        "after_open_mib": opened,
        "after_searches_mib": current_rss_mib(),
        "peak_mib": peak_rss_mib(),
        "searches": queries,
    }


def _served(
    baseline: float, opened: float, searches: int, summary: dict[str, Any]
) -> dict[str, Any]:
    """What a serving process held: before opening, after, after its searches, at peak."""
    return {
        "interpreter_mib": baseline,
        "after_open_mib": opened,
        "after_searches_mib": current_rss_mib(),
        "peak_mib": peak_rss_mib(),
        "searches": searches,
        "p95_ms": summary["p95_ms"],
    }


def _langgraph(path: str, stored: int, queries: int) -> dict[str, Any]:
    from bench import peer
    from bench.workload import Workload

    workload = Workload()
    batch = workload.queries(queries, stored)
    baseline = current_rss_mib()
    with peer.sqlite_store(Path(path)) as store:
        opened = current_rss_mib()
        summary = peer.searches(store, batch, batch[:10])
    return _served(baseline, opened, len(batch), summary)


def measure(arguments: list[str], timeout: float = 3600) -> dict[str, Any]:
    """Run this module in a fresh interpreter and return what it printed."""
    return run_module("bench.rss", arguments, timeout=timeout)


def run_module(
    module: str,
    arguments: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Run a bench module in a fresh interpreter; the JSON object its last line printed."""
    done = subprocess.run(
        [sys.executable, "-m", module, *arguments],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str]) -> None:
    if argv[0] == "service":
        result = _service(argv[1], int(argv[2]), int(argv[3]))
    elif argv[0] == "langgraph":
        result = _langgraph(argv[1], int(argv[2]), int(argv[3]))
    else:
        result = _naive(int(argv[1]), int(argv[2]))
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
