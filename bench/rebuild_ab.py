"""Same-run A/B of the projection rebuild: two source trees alternated on fresh copies of
one loaded SQLite store.

``python -m bench.rebuild_ab STORE_DIR OLD_SRC NEW_SRC [--rounds N]`` copies ``STORE_DIR``
(a loaded data directory: ``gmem.sqlite3`` and its key file) afresh before every run, runs
``python -m bench.rebuild COPY`` with ``PYTHONPATH=SRC`` for each tree in turn (the order
alternating between rounds), and prints each run's events/s and process CPU, then the
medians and the ratio new/old. The machine is shared and noisy: only same-run ratios mean
anything. ``--new-store DIR`` gives the new tree a store of its own (the same items
loaded by the new tree, when the two store them in different forms).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def run_once(store: Path, source: str, scratch: Path) -> dict[str, Any]:
    """One rebuild of a fresh copy of ``store`` under the code of ``source``."""
    copy = scratch / "store"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(store, copy)
    env = os.environ | {"PYTHONPATH": f"{source}{os.pathsep}{ROOT}"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "bench.rebuild", str(copy)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    last = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "events_per_s": last["events"] / last["seconds"],
        "seconds": last["seconds"],
        "cpu_s": cpu,
        "events": last["events"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--new-store", type=Path, default=None)
    args = parser.parse_args()
    stores = {"old": args.store, "new": args.new_store or args.store}
    with tempfile.TemporaryDirectory(prefix="rebuild-ab-") as scratch:
        results = alternated(
            args.rounds, lambda name: run_once(stores[name], getattr(args, name), Path(scratch))
        )
    print(json.dumps(summarized(results)))


def alternated(
    rounds: int, run: Callable[[str], dict[str, float]]
) -> dict[str, list[dict[str, float]]]:
    """``run("old")`` and ``run("new")`` in each of ``rounds`` rounds, which goes first
    alternating; every result printed as it comes, all returned by tree."""
    results: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for round_ in range(rounds):
        for name in ["old", "new"] if round_ % 2 == 0 else ["new", "old"]:
            result = run(name)
            results[name].append(result)
            print(name, json.dumps({k: round(v, 3) for k, v in result.items()}), flush=True)
    return results


def summarized(results: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Medians of events/s and CPU by tree, new ÷ old events/s, old ÷ new CPU."""
    summary = {
        name: {
            "events_per_s": statistics.median(r["events_per_s"] for r in runs),
            "cpu_s": statistics.median(r["cpu_s"] for r in runs),
        }
        for name, runs in results.items()
    }
    ratio = summary["new"]["events_per_s"] / summary["old"]["events_per_s"]
    cpu_ratio = summary["old"]["cpu_s"] / summary["new"]["cpu_s"]
    return summary | {"ratio": round(ratio, 2), "cpu_ratio": round(cpu_ratio, 2)}


if __name__ == "__main__":
    main()
