"""Peak memory of ``gmem replay`` under two source trees, alternated on fresh copies of
one loaded store.

``python -m bench.rebuild_rss STORE_DIR OLD_SRC NEW_SRC [--rounds N]`` copies ``STORE_DIR``
afresh before every run, runs ``gmem replay --data-dir COPY`` with ``PYTHONPATH=SRC`` for
each tree in turn and prints the child's peak RSS (``os.wait4``) in MiB, then the medians.
What a rebuild holds at once (a tenant's stored rows, its folded postings) shows here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def peak_mib(store: Path, source: str, scratch: Path) -> float:
    """The peak RSS of one ``gmem replay`` of a fresh copy of ``store``."""
    copy = scratch / "store"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(store, copy)
    env = os.environ | {"PYTHONPATH": source}
    command = [sys.executable, "-m", "governed_memory.cli", "replay", "--data-dir", str(copy)]
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"gmem replay failed under {source}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    peaks: dict[str, list[float]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory(prefix="rebuild-rss-") as scratch:
        for round_ in range(args.rounds):
            for name in ["old", "new"] if round_ % 2 == 0 else ["new", "old"]:
                peaks[name].append(peak_mib(args.store, getattr(args, name), Path(scratch)))
                print(name, round(peaks[name][-1], 1), flush=True)
    print(json.dumps({name: round(statistics.median(runs), 1) for name, runs in peaks.items()}))


if __name__ == "__main__":
    main()
