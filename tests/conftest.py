"""Fixtures shared by every test: stores of every backend, services over them, a clock."""

from __future__ import annotations

import os
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from governed_memory.crypto import Keyring
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from governed_memory.store.memory import MemoryStore
from governed_memory.store.sqlite import SQLiteStore
from tests.support.fakes import FakeClock

BACKENDS = ["memory", "sqlite", "postgres"]

# Property tests check what holds, never how fast: no per-example deadline (a shared,
# loaded machine made one example of a wire-form test overrun Hypothesis's 200 ms default).
settings.register_profile("governed-memory", deadline=None)
settings.load_profile("governed-memory")


def postgres_dsn() -> str | None:
    """The DSN of the test PostgreSQL server, or skip (fail in CI) when there is none."""
    dsn = os.environ.get("GMEM_TEST_POSTGRES_DSN")
    if dsn is None and os.environ.get("CI") != "true":
        dsn = "postgresql://postgres@127.0.0.1:5432/test"
    reason = ""
    if dsn is not None:
        try:
            import psycopg

            with psycopg.connect(dsn, connect_timeout=3):
                return dsn
        except Exception as error:  # noqa: BLE001 - any failure means: no server here
            reason = f"PostgreSQL at {dsn} is unreachable ({type(error).__name__})"
    else:
        reason = "GMEM_TEST_POSTGRES_DSN is not set"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the PostgreSQL leg: {reason}")
    pytest.skip(f"needs PostgreSQL: {reason}")


def make_store(backend: str, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store of ``backend``, removed afterwards."""
    if backend == "memory":
        yield MemoryStore()
    elif backend == "sqlite":
        store = SQLiteStore(tmp_path / "gmem.sqlite3")
        yield store
        store.close()
    else:
        dsn = postgres_dsn()
        assert dsn is not None
        from governed_memory.store.postgres import PostgresStore

        schema = "gmem_test_" + uuid.uuid4().hex[:12]
        pg = PostgresStore(dsn, schema=schema)
        try:
            yield pg
        finally:
            pg.drop_schema()
            pg.close()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store of each backend in turn (the contract suite runs on all of them)."""
    yield from make_store(request.param, tmp_path)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def keyring() -> Keyring:
    return Keyring(secrets.token_bytes(32))


@pytest.fixture
def service(store: Store, keyring: Keyring, clock: FakeClock) -> MemoryService:
    """The service over each backend, with a fake clock."""
    return MemoryService(store, keyring, clock=clock)
