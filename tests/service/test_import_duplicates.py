"""An export that names one thing twice is refused before anything is written: a second
subject key of a subject, item key of an item, event with an event id, API key with a key
id or idempotency record of one (tenant, credential, key) fails the import, naming its
line, and leaves the target store empty, so that the import can be retried."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from governed_memory.crypto import Keyring
from governed_memory.errors import ValidationError
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from tests.conftest import make_store
from tests.service.test_carried import TARGETS, sqlite_source
from tests.support.fakes import FakeClock

KINDS = ["subject_key", "item_key", "api_key", "idempotency"]


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An empty store of each backend, to import into."""
    yield from make_store(request.param, tmp_path / "target")


def export_lines(service: MemoryService) -> list[str]:
    return [json.dumps(record) + "\n" for record in service.maintenance.export()]


def assert_empty(store: Store) -> None:
    assert store.head() == 0
    assert next(store.subject_keys(limit=1), None) is None
    assert next(store.item_keys(), None) is None
    assert store.api_keys() == []
    assert store.idempotency_records(None, 10) == []


def refused(target: Store, keyring: Keyring, lines: list[str], number: int) -> None:
    """Importing ``lines`` fails naming line ``number`` as a repeat, writing nothing;
    the same export without that line then imports."""
    service = MemoryService(target, keyring, clock=FakeClock())
    with pytest.raises(ValidationError, match=f"^line {number} repeats "):
        service.maintenance.import_log(lines)
    assert_empty(target)
    service.maintenance.import_log(lines[: number - 1] + lines[number:])
    assert target.head() > 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_record_given_twice_is_refused_before_anything_is_written(
    tmp_path: Path, target: Store, keyring: Keyring, kind: str
) -> None:
    """The same subject key, item key, API key or idempotency record line twice in an
    export fails the import at the second one, and the store stays empty."""
    with sqlite_source(tmp_path, keyring) as source:
        lines = export_lines(source.service)
    first = next(n for n, line in enumerate(lines) if f'"record": "{kind}"' in line)
    lines.insert(first + 1, lines[first])
    refused(target, keyring, lines, first + 2)


def test_an_event_id_given_twice_is_refused_before_anything_is_written(
    tmp_path: Path, target: Store, keyring: Keyring
) -> None:
    """An event whose event id an earlier event had, even at a later position, fails the
    import at its line, and the store stays empty."""
    with sqlite_source(tmp_path, keyring) as source:
        lines = export_lines(source.service)
    events = [n for n, line in enumerate(lines) if '"record": "event"' in line]
    again = json.loads(lines[events[0]])
    again["position"] = json.loads(lines[events[-1]])["position"] + 1
    lines.insert(events[-1] + 1, json.dumps(again) + "\n")
    refused(target, keyring, lines, events[-1] + 2)
