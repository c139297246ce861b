"""Same-run A/B of the projection rebuild on PostgreSQL: two source trees alternated over
one store imported into a database of its own.

``python -m bench.rebuild_pg_ab SQLITE_STORE_DIR DSN OLD_SRC NEW_SRC [--rounds N]`` exports
the loaded SQLite store, imports it into the (empty) database ``DSN`` with the same master
key, then runs ``service.maintenance.rebuild()`` in a child process under each tree in
turn (the order alternating between rounds) and prints each run's events/s and the
client's process CPU, then the medians. The rebuild of an intact projection writes
nothing, so every run starts from the same rows. The machine is shared and noisy: only
same-run ratios mean anything.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.rebuild_ab import alternated, summarized

ROOT = Path(__file__).resolve().parent.parent
#: The master key reaches the child in its environment, not on its command line.
KEY_VARIABLE = "REBUILD_AB_MASTER_KEY"


def _load(store: Path, dsn: str, key: str) -> int:
    """Import the SQLite store's export into the database; its events."""
    from governed_memory.bootstrap import open_service

    source = open_service(data_dir=store)
    target = open_service(database_url=dsn, master_key=key)
    lines = (json.dumps(record) for record in source.maintenance.export())
    report = target.maintenance.import_log(lines)
    source.close()
    target.close()
    return report.events


def _child(dsn: str) -> None:
    from governed_memory.bootstrap import open_service

    service = open_service(database_url=dsn, master_key=os.environ[KEY_VARIABLE])
    events = service.store.head()
    start = time.perf_counter()
    service.maintenance.rebuild()
    seconds = time.perf_counter() - start
    service.close()
    print(json.dumps({"events": events, "seconds": seconds}))


def run_once(dsn: str, key: str, source: str) -> dict[str, Any]:
    env = os.environ | {"PYTHONPATH": f"{source}{os.pathsep}{ROOT}", KEY_VARIABLE: key}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "bench.rebuild_pg_ab", "--child", dsn],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    last = json.loads(done.stdout.splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"events_per_s": last["events"] / last["seconds"], "seconds": last["seconds"]} | {
        "cpu_s": cpu
    }


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("dsn")
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    key = (args.store / "master.key").read_text().strip()
    print("imported", _load(args.store, args.dsn, key), "events", flush=True)
    results = alternated(args.rounds, lambda name: run_once(args.dsn, key, getattr(args, name)))
    print(json.dumps(summarized(results)))


if __name__ == "__main__":
    main()
