"""PostgreSQL figures: the raw insert limit, and the service's writes once the store exists.

The service figures plug in as soon as ``governed_memory.store.postgres.PostgresStore``
can be imported; until then they are reported as not available, with the reason. Each
run works in a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import os
import secrets
import uuid
from collections.abc import Sequence
from typing import Any

from bench.inprocess import concurrent_writes, first_writes, sequential_writes
from bench.workload import Item
from governed_memory.crypto import Keyring
from governed_memory.service import MemoryService


def store_missing() -> str | None:
    """None when the PostgreSQL store can be imported, else why not."""
    try:
        from governed_memory.store.postgres import PostgresStore  # noqa: F401
    except ImportError as error:
        return f"the PostgreSQL store is not built yet ({error})"
    return None


def _open(dsn: str, schema: str) -> Any:
    from governed_memory.store.postgres import PostgresStore

    try:
        return PostgresStore(dsn, schema=schema)
    except Exception:  # noqa: BLE001 - the store may expect its schema to exist: retry once
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        return PostgresStore(dsn, schema=schema)


def service_writes(
    dsn: str, sequential: Sequence[Item], concurrent: Sequence[Item], threads: int
) -> dict[str, Any]:
    """Sequential and concurrent writes/s of the service over PostgreSQL, warm subjects."""
    import psycopg

    schema = f"bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    store = _open(dsn, schema)
    try:
        service = MemoryService(store, Keyring(secrets.token_bytes(32)))
        first_count, first_seconds = first_writes(service, [*sequential, *concurrent])
        sequential_rate = sequential_writes(service, sequential)
        concurrent_rate = concurrent_writes(service, concurrent, threads)
    finally:
        try:
            store.close()
        finally:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return {
        "sequential_per_s": sequential_rate,
        "concurrent_per_s": concurrent_rate,
        "first_subject_writes_per_s": first_count / first_seconds if first_seconds else 0.0,
    }
