"""Whole-store operations: rebuild the projection from the log, export and import the log.

The export format is JSON Lines: one ``{"record": "subject_key", ...}`` line per live
subject key (still wrapped under the master key) followed by one ``{"record": "event",
...}`` line per event in position order (content still sealed). Importing into an empty
store with the same master key, then rebuilding, reproduces the projection exactly; that
is how a store moves from SQLite to PostgreSQL.
"""

from __future__ import annotations

import base64
import binascii
import json
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from governed_memory.codec import CodecError, stored_from_json, stored_to_json
from governed_memory.core.events import StoredEvent
from governed_memory.core.model import ItemState
from governed_memory.core.projection import replay
from governed_memory.core.values import Status, subject_id, tenant_id
from governed_memory.errors import CryptoError, LogMoved, StoreUnavailable, ValidationError
from governed_memory.records import ItemChange, SubjectKey
from governed_memory.service import MemoryService

IMPORT_CHUNK = 5_000
REBUILD_ATTEMPTS = 20


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import added."""

    events: int
    subject_keys: int
    items: int


class Maintenance:
    """Whole-store operations of one service: ``service.maintenance``."""

    def __init__(self, service: MemoryService) -> None:
        self._service = service

    def rebuild(self) -> int:
        """Replace the projection with the fold of the log; the number of items."""
        return rebuild_projection(self._service)

    def export(self) -> Iterator[dict[str, Any]]:
        """Every live subject key, then every event, as JSON-ready records."""
        return export_log(self._service)

    def import_log(self, lines: Iterable[str]) -> ImportReport:
        """Load an export into an empty store, then rebuild the projection."""
        return import_log(self._service, lines)


def rebuild_projection(service: MemoryService) -> int:
    """Replace every tenant's projection and postings with the fold of its log.

    Searchable items need their plaintext to be indexed again, so each tenant's live
    subject keys are loaded once and every active item is decrypted with them.
    """
    keys: dict[tuple[str, str], SubjectKey] = {
        (key.tenant_id, key.subject_id): key for key in service.store.subject_keys()
    }
    total = 0
    for tenant in service.store.tenants():
        total += _rebuild_tenant(service, keys, tenant)
    return total


def _rebuild_tenant(
    service: MemoryService, keys: dict[tuple[str, str], SubjectKey], tenant: str
) -> int:
    """Fold the tenant's log and swap the result in, again if a write landed meanwhile."""
    for _ in range(REBUILD_ATTEMPTS):
        events = list(service.store.tenant_events(tenant))
        through = events[-1].position if events else 0
        items = replay(stored.event for stored in events)
        changes = [_change(service, keys, item) for _, item in sorted(items.items())]
        try:
            service.store.rebuild(tenant, changes, through)
        except LogMoved:
            continue
        return len(changes)
    raise StoreUnavailable(f"tenant {tenant!r} kept writing during the rebuild; retry")


def _change(
    service: MemoryService, keys: dict[tuple[str, str], SubjectKey], item: ItemState
) -> ItemChange:
    if item.status is not Status.ACTIVE or item.content is None:
        return ItemChange(item, 0, None)
    key = keys.get((item.tenant_id, item.subject_id))
    if key is None or key.key_id != service.keyring.key_id_of(item.content):
        return ItemChange(item, 0, None)  # the key is gone: nothing left to index
    content = service.keyring.open(key, item.id, item.content_version, item.content)
    return ItemChange(item, 0, service.index_doc(item.tenant_id, content))


def export_log(service: MemoryService) -> Iterator[dict[str, Any]]:
    """Every live subject key, then every event, as JSON-ready records.

    Everything is read from one snapshot of the store: a forget committing during the
    export must not leave the export holding both a destroyed key and its ciphertext.
    """
    with service.store.snapshot():
        for key in service.store.subject_keys():
            yield {
                "record": "subject_key",
                "tenant_id": key.tenant_id,
                "subject_id": key.subject_id,
                "key_id": base64.b64encode(key.key_id).decode("ascii"),
                "wrapped": base64.b64encode(key.wrapped).decode("ascii"),
            }
        after = 0
        while True:
            page = service.store.events_after(None, after, IMPORT_CHUNK)
            for stored in page:
                yield {"record": "event"} | stored_to_json(stored)
            if len(page) < IMPORT_CHUNK:
                return
            after = page[-1].position


def _subject_key(data: dict[str, Any]) -> SubjectKey:
    try:
        return SubjectKey(
            tenant_id(data["tenant_id"]),
            subject_id(data["subject_id"]),
            base64.b64decode(data["key_id"], validate=True),
            base64.b64decode(data["wrapped"], validate=True),
        )
    except (KeyError, TypeError, binascii.Error) as error:
        raise ValidationError(f"malformed subject key record: {type(error).__name__}") from None


def import_log(service: MemoryService, lines: Iterable[str]) -> ImportReport:
    """Load an export into an empty store, then rebuild the projection.

    The whole export is validated first (every record decodes, keys unwrap under this
    master key, positions strictly increase) and spooled to a temporary file; only then
    is anything written, so a bad line cannot leave a partial, append-only log behind.
    """
    if service.store.head() != 0 or next(service.store.subject_keys(limit=1), None):
        raise ValidationError("import needs an empty store: this one already has data")
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        _validate_into(service, lines, spool)
        spool.seek(0)
        keys = events = 0
        chunk: list[StoredEvent] = []
        for line in spool:
            data = json.loads(line)
            if data.pop("record") == "subject_key":
                service.store.add_subject_key(_subject_key(data))
                keys += 1
                continue
            chunk.append(stored_from_json(data))
            if len(chunk) >= IMPORT_CHUNK:
                service.store.import_events(chunk)
                events, chunk = events + len(chunk), []
        if chunk:
            service.store.import_events(chunk)
            events += len(chunk)
    return ImportReport(events, keys, rebuild_projection(service))


def _validate_into(service: MemoryService, lines: Iterable[str], spool: IO[str]) -> None:
    """Check every record of an export; copy the valid ones to ``spool``; raise on the first
    bad one, naming its line."""
    last = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise TypeError
            record = data.get("record")
            body = {k: v for k, v in data.items() if k != "record"}
            if record == "subject_key":
                service.keyring.unwrap(_subject_key(body))  # the master key must match
            elif record == "event":
                position = stored_from_json(body).position
                if position <= last:
                    raise ValueError
                last = position
            else:
                raise TypeError
        except (ValueError, TypeError, KeyError, CodecError, CryptoError, ValidationError) as error:
            detail = error.detail if isinstance(error, CryptoError) else type(error).__name__
            raise ValidationError(
                f"line {number} is not a valid export record ({detail})"
            ) from None
        spool.write(line.rstrip("\n") + "\n")
