"""The projection rebuild, timed in a process of its own with a time limit.

``python -m bench.rebuild DATA_DIR`` runs ``service.maintenance.rebuild()`` over the
store and prints one JSON line per transaction of tenants swapped in (events, items and
tenants so far, seconds), then a final line. The parent stops it after a time limit and
takes the rate from the last line it printed: a slow rebuild cannot hold the whole
benchmark hostage, and tenants are swapped in by whole transactions, so a stopped rebuild
leaves every tenant consistent. Tenants the store found intact ahead (worker processes on
SQLite, ``Store.check_intact``) are counted, events included, when the rebuild accepts
them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_memory.bootstrap import open_service
from governed_memory.core.events import StoredEvent
from governed_memory.records import TenantRebuild

if TYPE_CHECKING:  # absent from older trees, which the A/B harnesses run this under
    from governed_memory.records import Intact, IntactCheck


def _run(data_dir: str) -> None:
    service = open_service(data_dir=data_dir, synchronous="FULL")
    store = service.store
    progress = {"events": 0, "items": 0, "tenants": 0}
    tenant_events, rebuild = store.tenant_events, store.rebuild
    start = time.perf_counter()

    # Instrumentation only: count what passes through the two store calls the rebuild makes.
    def counted_events(tenant_id: str) -> Iterator[StoredEvent]:
        for stored in tenant_events(tenant_id):
            progress["events"] += 1
            yield stored

    def counted_rebuild(tenants: Sequence[TenantRebuild]) -> set[str]:
        moved = rebuild(tenants)
        swapped = [tenant for tenant in tenants if tenant.tenant_id not in moved]
        progress["items"] += sum(len(tenant.changes) for tenant in swapped)
        progress["tenants"] += len(swapped)
        print(json.dumps(progress | {"seconds": time.perf_counter() - start}), flush=True)
        return moved

    store.tenant_events = counted_events  # type: ignore[method-assign]
    store.rebuild = counted_rebuild  # type: ignore[method-assign, assignment]
    check_intact = getattr(store, "check_intact", None)  # absent from older trees (A/B)
    if check_intact is not None:

        def counted_check(tenants: Sequence[str]) -> IntactCheck:
            return _CountedCheck(check_intact(tenants), progress, start)

        store.check_intact = counted_check  # type: ignore[method-assign]
    service.maintenance.rebuild()
    seconds = time.perf_counter() - start
    print(json.dumps(progress | {"seconds": seconds, "done": True}), flush=True)
    store.close()


class _CountedCheck:
    """Instrumentation only: the tenants found intact ahead and taken as rebuilt count
    their events, items and tenants when accepted (the rebuild does not read them again)."""

    def __init__(self, check: IntactCheck, progress: dict[str, int], start: float) -> None:
        self._check, self._progress, self._start = check, progress, start

    @property
    def tenants(self) -> Mapping[str, Intact]:
        return self._check.tenants

    def accept(self) -> set[str]:
        accepted = self._check.accept()
        for tenant in accepted:
            intact = self.tenants[tenant]
            self._progress["events"] += intact.events
            self._progress["items"] += intact.items
            self._progress["tenants"] += 1
        seconds = time.perf_counter() - self._start
        print(json.dumps(self._progress | {"seconds": seconds}), flush=True)
        return accepted


def measure(data_dir: str, limit_seconds: float) -> dict[str, Any]:
    """Events/s of the rebuild, over the whole log or over what ``limit_seconds`` allowed."""
    command = [sys.executable, "-m", "bench.rebuild", data_dir]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit_seconds)
        if done.returncode != 0:
            raise RuntimeError(f"the rebuild failed: {done.stderr.strip()[-300:]}")
        output = done.stdout
    except subprocess.TimeoutExpired as stopped:
        raw = stopped.stdout or b""
        output = raw.decode() if isinstance(raw, bytes) else raw
    lines = [line for line in output.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the rebuild reported no tenant within {limit_seconds:.0f} s")
    last: dict[str, Any] = json.loads(lines[-1])
    last["events_per_s"] = last["events"] / last["seconds"]
    last.setdefault("done", False)
    last["limit_seconds"] = limit_seconds
    return last


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.rebuild", description=__doc__)
    parser.add_argument("data_dir", help="a loaded data directory (gmem.sqlite3, its key)")
    args = parser.parse_args(argv)
    if not (Path(args.data_dir) / "gmem.sqlite3").is_file():
        parser.error(f"{args.data_dir}: no gmem.sqlite3 there (a loaded store is needed)")
    _run(args.data_dir)


if __name__ == "__main__":
    main()
