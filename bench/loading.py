"""Filling a store with the workload through the service's real write path.

Every item goes through ``MemoryService.write`` (validation, sealing, postings, the group
commit), with ``synchronous=OFF`` while loading, since loading speed is not a figure; the
figures are measured afterwards on a store reopened with ``synchronous=FULL``. Writers
run in separate processes (``spawn``) because a second process, unlike a second thread,
adds CPU: threads only contend for the GIL (see docs/benchmarks.md).

A loaded store can be kept in a cache directory keyed by the workload and a hash of the
service's source, so a rerun with unchanged code skips the load.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import governed_memory
from bench.workload import Workload
from governed_memory.bootstrap import open_service
from governed_memory.core.model import Principal
from governed_memory.core.values import Scope, Trust
from governed_memory.service import MemoryService
from governed_memory.store.sqlite import SQLiteStore

STATE_FILE = "bench-state.json"


def writer(tenant_id: str) -> Principal:
    """A trusted principal of ``tenant_id`` with every scope and every agent."""
    return Principal(tenant_id, "bench", frozenset(Scope), Trust.TRUSTED, None)


@dataclass(frozen=True, slots=True)
class LoadReport:
    items: int
    seconds: float
    processes: int
    synchronous: str
    reused_from_cache: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "seconds": round(self.seconds, 3),
            "items_per_s": round(self.items / self.seconds, 1) if self.seconds else None,
            "processes": self.processes,
            "synchronous": self.synchronous,
            "reused_from_cache": self.reused_from_cache,
        }


def write_items(service: MemoryService, workload: Workload, indices: range) -> None:
    for index in indices:
        item = workload.item(index)
        service.write(writer(item.tenant_id), item.body())


def _load_slice(data_dir: str, workload: Workload, indices: range) -> None:
    service = open_service(data_dir=data_dir, synchronous="OFF")
    try:
        write_items(service, workload, indices)
    finally:
        service.store.close()


def loaded(data_dir: Path) -> int:
    """How many workload items the store in ``data_dir`` holds (0 when new)."""
    state = data_dir / STATE_FILE
    return int(json.loads(state.read_text())["loaded"]) if state.exists() else 0


def _mark(data_dir: Path, count: int) -> None:
    (data_dir / STATE_FILE).write_text(json.dumps({"loaded": count}))


def load(data_dir: Path, workload: Workload, stop: int, processes: int) -> LoadReport:
    """Write items ``loaded(data_dir) .. stop-1`` into the store in ``data_dir``."""
    start = loaded(data_dir)
    service = open_service(data_dir=data_dir, synchronous="OFF")  # creates store and key file
    began = time.perf_counter()
    try:
        if processes <= 1 or stop - start < 1000:
            write_items(service, workload, range(start, stop))
        else:
            context = multiprocessing.get_context("spawn")
            workers = [
                context.Process(
                    target=_load_slice,
                    args=(str(data_dir), workload, range(start + k, stop, processes)),
                )
                for k in range(processes)
            ]
            for process in workers:
                process.start()
            for process in workers:
                process.join()
                if process.exitcode != 0:
                    raise RuntimeError(f"a loading process failed (exit {process.exitcode})")
        if isinstance(service.store, SQLiteStore):
            service.store.checkpoint()
    finally:
        service.store.close()
    seconds = time.perf_counter() - began
    _mark(data_dir, stop)
    return LoadReport(stop - start, seconds, processes, "OFF")


def cache_key(workload: Workload) -> str:
    """The workload's parameters and the service's source: a stale store is never reused."""
    digest = hashlib.sha256(json.dumps(workload.describe(), sort_keys=True).encode())
    source = Path(str(governed_memory.__file__)).parent
    for path in sorted(source.rglob("*")):
        if path.suffix in {".py", ".sql"}:
            digest.update(str(path.relative_to(source)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def restore(cache: Path | None, workload: Workload, data_dir: Path, stop: int) -> int:
    """Copy the largest cached store of at most ``stop`` items into ``data_dir``."""
    if cache is None or loaded(data_dir):
        return 0
    folder = cache / cache_key(workload)
    sizes = sorted(
        (int(p.name[1:]) for p in folder.glob("n*") if p.name[1:].isdigit()), reverse=True
    )
    for size in sizes:
        if size <= stop:
            shutil.rmtree(data_dir, ignore_errors=True)
            shutil.copytree(folder / f"n{size}", data_dir)
            return size
    return 0


def save(cache: Path | None, workload: Workload, data_dir: Path) -> None:
    """Keep a copy of the store in ``data_dir`` in the cache."""
    if cache is None:
        return
    target = cache / cache_key(workload) / f"n{loaded(data_dir)}"
    if not target.exists():
        shutil.copytree(data_dir, target)


def ensure(
    data_dir: Path, workload: Workload, stop: int, processes: int, cache: Path | None
) -> LoadReport:
    """A store of exactly ``stop`` workload items in ``data_dir``, from cache if possible."""
    reused = restore(cache, workload, data_dir, stop)
    if loaded(data_dir) >= stop:
        return LoadReport(0, 0.0, processes, "OFF", reused)
    report = load(data_dir, workload, stop, processes)
    save(cache, workload, data_dir)
    return LoadReport(report.items, report.seconds, processes, "OFF", reused)
