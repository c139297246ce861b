"""PostgreSQL figures: the service's writes, and its scoped searches over a loaded store.

The service figures plug in as soon as ``governed_memory.store.postgres.PostgresStore``
can be imported; until then they are reported as not available, with the reason. Each
store lives in a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from bench.inprocess import concurrent_writes, first_writes, sequential_writes
from bench.loading import write_items
from bench.workload import Item, Workload
from governed_memory.crypto import Keyring
from governed_memory.service import MemoryService


def store_missing() -> str | None:
    """None when the PostgreSQL store can be imported, else why not."""
    try:
        from governed_memory.store.postgres import PostgresStore  # noqa: F401
    except ImportError as error:
        return f"the PostgreSQL store is not built yet ({error})"
    return None


def open_store(dsn: str, schema: str) -> Any:
    """The PostgreSQL store in ``schema`` (made if the store expects it to exist)."""
    from governed_memory.store.postgres import PostgresStore

    try:
        return PostgresStore(dsn, schema=schema)
    except Exception:  # noqa: BLE001 - the store may expect its schema to exist: retry once
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        return PostgresStore(dsn, schema=schema)


def drop_schema(dsn: str, schema: str) -> None:
    """``schema`` gone, with everything in it."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@contextlib.contextmanager
def fresh_service(dsn: str) -> Iterator[MemoryService]:
    """A service over a new PostgreSQL store in a schema of its own, dropped afterwards."""
    schema = f"bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    store = open_store(dsn, schema)
    try:
        yield MemoryService(store, Keyring(secrets.token_bytes(32)))
    finally:
        try:
            store.close()
        finally:
            drop_schema(dsn, schema)


@contextlib.contextmanager
def loaded_service(
    dsn: str, workload: Workload, stop: int, threads: int, master_key: bytes | None = None
) -> Iterator[tuple[MemoryService, float]]:
    """A service over a new store holding workload items ``0 .. stop-1``, and the seconds
    the load took (not a figure).

    The items go through ``MemoryService.write``, ``threads`` writers sharing the group
    commit, over connections with ``synchronous_commit=off`` (as the SQLite stores load
    with ``synchronous=OFF``); the service yielded reads through a pool of its own, with
    the server's settings. ``master_key``: the keyring's (random unless given).
    """
    from psycopg.conninfo import make_conninfo

    from governed_memory.store.postgres import PostgresStore

    keyring = Keyring(master_key or secrets.token_bytes(32))
    schema = f"bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    store = open_store(dsn, schema)
    try:
        loading = PostgresStore(
            make_conninfo(dsn, options="-c synchronous_commit=off"), schema=schema
        )
        try:
            seconds = _load(MemoryService(loading, keyring), workload, stop, threads)
        finally:
            loading.close()
        yield MemoryService(store, keyring), seconds
    finally:
        try:
            store.close()
        finally:
            drop_schema(dsn, schema)


def _load(service: MemoryService, workload: Workload, stop: int, threads: int) -> float:
    """Write workload items ``0 .. stop-1`` through ``service`` from ``threads`` threads;
    seconds taken."""
    began = time.perf_counter()
    errors: list[BaseException] = []

    def share(k: int) -> None:
        try:
            write_items(service, workload, range(k, stop, threads))
        except BaseException as error:  # noqa: BLE001 - raised by the caller
            errors.append(error)

    writers = [threading.Thread(target=share, args=(k,)) for k in range(threads)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - began


def service_writes(
    dsn: str, sequential: Sequence[Item], concurrent: Sequence[Item], threads: int
) -> dict[str, Any]:
    """Sequential and concurrent writes/s of the service over PostgreSQL, warm subjects."""
    with fresh_service(dsn) as writing:
        first_count, first_seconds = first_writes(writing, [*sequential, *concurrent])
        sequential_rate = sequential_writes(writing, sequential)
        concurrent_rate = concurrent_writes(writing, concurrent, threads)
    return {
        "sequential_per_s": sequential_rate,
        "concurrent_per_s": concurrent_rate,
        "first_subject_writes_per_s": first_count / first_seconds if first_seconds else 0.0,
    }
