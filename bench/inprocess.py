"""The in-process figures: durable writes, concurrent writers, scoped search, rebuild."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.loading import writer
from bench.naive import NaiveMemory
from bench.stats import latency_summary, rate, timed_calls
from bench.workload import Item, Query, Workload
from governed_memory.core.events import Event
from governed_memory.core.projection import replay
from governed_memory.service import MemoryService

# Write figures use items far beyond any loaded range, so their ids never collide.
SEQUENTIAL_OFFSET = 50_000_000
CONCURRENT_OFFSET = 60_000_000
WARMUP_QUERIES = 100


def first_writes(service: MemoryService, items: Sequence[Item]) -> tuple[int, float]:
    """One write per distinct (tenant, subject) of ``items``, creating its subject key.

    Returns how many writes and how long they took: the rate of a subject's first write.
    """
    seen: dict[tuple[str, str], Item] = {}
    for item in items:
        seen.setdefault((item.tenant_id, item.subject_id), item)
    start = time.perf_counter()
    for item in seen.values():
        service.write(writer(item.tenant_id), item.body() | {"id": f"w{item.memory_id}"})
    return len(seen), time.perf_counter() - start


def sequential_writes(service: MemoryService, items: Sequence[Item]) -> float:
    """Writes/s of one caller writing ``items`` one after another."""
    bodies = [(writer(item.tenant_id), item.body()) for item in items]
    start = time.perf_counter()
    for principal, body in bodies:
        service.write(principal, body)
    return rate(len(bodies), time.perf_counter() - start)


def concurrent_writes(service: MemoryService, items: Sequence[Item], threads: int) -> float:
    """Writes/s of ``threads`` callers writing their share of ``items`` at the same time."""
    shares = [
        [(writer(item.tenant_id), item.body()) for item in items[k::threads]]
        for k in range(threads)
    ]
    gate = threading.Barrier(threads + 1)
    errors: list[BaseException] = []

    def run(share: list[tuple[Any, dict[str, Any]]]) -> None:
        gate.wait()
        try:
            for principal, body in share:
                service.write(principal, body)
        except BaseException as error:  # noqa: BLE001 - reported by the caller
            errors.append(error)

    workers = [threading.Thread(target=run, args=(share,)) for share in shares]
    for thread in workers:
        thread.start()
    gate.wait()
    start = time.perf_counter()
    for thread in workers:
        thread.join()
    seconds = time.perf_counter() - start
    if errors:
        raise errors[0]
    return rate(len(items), seconds)


def naive_writes(path: Path, items: Sequence[Item], *, durable: bool) -> float:
    """Writes/s of the naive baseline appending one JSON line per write."""
    naive = NaiveMemory(path, durable=durable)
    start = time.perf_counter()
    for item in items:
        naive.write(item.tenant_id, item.body())
    return rate(len(items), time.perf_counter() - start)


def page_in(*databases: Path) -> dict[str, float]:
    """Read each SQLite file of ``databases`` and its write-ahead log (those that exist)
    once, front to back, so the OS page cache holds them: a store searched in a steady
    state, as the naive baseline holds its items in memory. On a machine that reclaims
    idle page cache (this one runs DAMON's reclaim), the searches timed right after
    loading would otherwise pay disk reads that depend on how long the load left each
    page idle. The MiB read and the seconds it took."""
    read, start = 0, time.perf_counter()
    for database in databases:
        for path in (database, database.with_name(database.name + "-wal")):
            if path.exists():
                with path.open("rb", buffering=0) as file:
                    while chunk := file.read(1 << 20):
                        read += len(chunk)
    return {"paged_in_mib": read / 2**20, "page_in_s": time.perf_counter() - start}


def service_search(
    service: MemoryService, queries: Sequence[Query], warmup: Sequence[Query]
) -> dict[str, Any]:
    """Latency of in-process scoped searches, and how many items they returned."""
    returned: list[int] = []

    def call(query: Query) -> None:
        returned.append(len(service.search(writer(query.tenant_id), query.body()).items))

    timed_calls(call, warmup)
    returned.clear()
    summary = latency_summary(timed_calls(call, queries))
    summary["mean_results"] = sum(returned) / len(returned)
    return summary


def naive_search(naive: NaiveMemory, queries: Sequence[Query]) -> dict[str, Any]:
    """Latency of the naive linear scan over the same queries."""
    returned: list[int] = []

    def call(query: Query) -> None:
        hits = naive.search(query.tenant_id, query.agent_id, query.purpose, query.text)
        returned.append(len(hits))

    timed_calls(call, queries[:5])
    returned.clear()
    summary = latency_summary(timed_calls(call, queries))
    summary["mean_results"] = sum(returned) / len(returned)
    return summary


def search_queries(workload: Workload, stored: int, count: int) -> tuple[list[Query], list[Query]]:
    """The timed queries and, from another slice of the stream, the warm-up queries."""
    return workload.queries(count, stored), workload.queries(WARMUP_QUERIES, stored, 10**8)


def replay_fold(service: MemoryService, cap: int) -> dict[str, Any]:
    """Events/s of the core fold alone (``replay``) over the first ``cap`` events.

    Also the rate of reading and decoding those events from the store, timed apart.
    """
    start = time.perf_counter()
    events: list[Event] = []
    after = 0
    while len(events) < cap:
        page = service.store.events_after(None, after, min(5000, cap - len(events)))
        if not page:
            break
        events.extend(stored.event for stored in page)
        after = page[-1].position
    read_seconds = time.perf_counter() - start
    start = time.perf_counter()
    replay(events)
    fold_seconds = time.perf_counter() - start
    return {
        "events": len(events),
        "fold_seconds": fold_seconds,
        "events_per_s": len(events) / fold_seconds,
        "read_decode_events_per_s": len(events) / read_seconds,
    }


def naive_reload(path: Path, naive: NaiveMemory, cap: int) -> dict[str, Any]:
    """Events/s of the naive baseline reloading its dict from its JSON-lines log."""
    import json

    with open(path, "w", encoding="utf-8") as handle:
        for number, item in enumerate(naive.items.values()):
            if number >= cap:
                break
            handle.write(json.dumps({"type": "memory.written", "item": item}) + "\n")
    copy = NaiveMemory(path)
    start = time.perf_counter()
    events = copy.reload()
    seconds = time.perf_counter() - start
    return {"events": events, "seconds": seconds, "events_per_s": events / seconds}
