"""An export carries the API keys and the idempotency records: a store moved with
export/import (SQLite to PostgreSQL, or any backend to any other) keeps its credentials
and answers a retried request from its first outcome."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from governed_memory.apikeys import create_api_key, split_token, verify
from governed_memory.core.model import Principal
from governed_memory.core.values import Scope, Trust
from governed_memory.crypto import Keyring
from governed_memory.errors import ValidationError
from governed_memory.ports import Store
from governed_memory.results import WriteResult
from governed_memory.service import MemoryService
from tests.conftest import make_store
from tests.support.fakes import START, FakeClock, body

TARGETS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An empty store of each backend, to import into."""
    yield from make_store(request.param, tmp_path / "target")


def moved(source: MemoryService, target: Store, keyring: Keyring, **export: bool) -> MemoryService:
    """The source's export (as JSON Lines text) imported into ``target``."""
    lines = [json.dumps(record) + "\n" for record in source.maintenance.export(**export)]
    service = MemoryService(target, keyring, clock=FakeClock())
    service.maintenance.import_log(lines)
    return service


@contextmanager
def sqlite_source(tmp_path: Path, keyring: Keyring) -> Iterator[Source]:
    """A SQLite store (the usual source of a move) with a writing key of the tenant acme
    and one write made with the idempotency key ``retry-1``."""
    for store in make_store("sqlite", tmp_path / "source"):
        record, token = create_api_key(
            "acme",
            None,
            frozenset({Scope.MEMORY_WRITE, Scope.MEMORY_READ}),
            Trust.TRUSTED,
            START,
            "support bot",
            principal="bot",
        )
        store.add_api_key(record)
        key_id, secret = split_token(token)
        writer = verify(store.api_key(key_id), secret, START)
        service = MemoryService(store, keyring, clock=FakeClock())
        first = service.write(writer, body(id="m1"), idempotency_key="retry-1")
        yield Source(service, writer, key_id, secret, first)


@dataclass
class Source:
    service: MemoryService
    writer: Principal
    key_id: str
    secret: str
    first: WriteResult


def test_a_moved_store_keeps_its_api_keys_and_idempotency_records(
    tmp_path: Path, target: Store, keyring: Keyring
) -> None:
    """Exported from SQLite and imported into each backend, the old key authenticates as
    the same principal, and a write retried with its idempotency key replays its first
    outcome instead of writing again."""
    with sqlite_source(tmp_path, keyring) as source:
        service = moved(source.service, target, keyring)
        record = target.api_key(source.key_id)
        assert record == source.service.store.api_key(source.key_id)
        assert verify(record, source.secret, START) == source.writer
        again = service.write(source.writer, body(id="m1"), idempotency_key="retry-1")
        assert again.item.version == source.first.item.version == 1
        assert again.created is source.first.created is True
        assert target.head() == source.service.store.head()


def test_without_credentials_the_export_carries_neither(
    tmp_path: Path, target: Store, keyring: Keyring
) -> None:
    """``export(credentials=False)`` leaves the API keys and idempotency records out."""
    with sqlite_source(tmp_path, keyring) as source:
        records = [r["record"] for r in source.service.maintenance.export(credentials=False)]
        assert "api_key" not in records and "idempotency" not in records
        moved(source.service, target, keyring, credentials=False)
        assert target.api_key(source.key_id) is None
        assert target.idempotency("acme", source.writer.credential, "retry-1") is None


def test_a_malformed_api_key_record_is_refused_before_anything_is_written(
    tmp_path: Path, target: Store, keyring: Keyring
) -> None:
    """An api_key record with a bad secret hash fails the import, naming its line, and
    the target stays empty."""
    with sqlite_source(tmp_path, keyring) as source:
        lines = [json.dumps(record) + "\n" for record in source.service.maintenance.export()]
        number = next(n for n, line in enumerate(lines, 1) if '"api_key"' in line)
        lines[number - 1] = lines[number - 1].replace('"secret_hash": "', '"secret_hash": "z')
        service = MemoryService(target, keyring, clock=FakeClock())
        with pytest.raises(ValidationError, match=f"line {number} is not a valid export"):
            service.maintenance.import_log(lines)
        assert target.head() == 0 and target.api_keys() == []
