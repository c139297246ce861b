"""Whole-store operations: rebuild the projection from the log, export and import the log.

The export format is JSON Lines: one ``{"record": "subject_key", ...}`` line per live
subject key (still wrapped under the master key), one ``{"record": "item_key", ...}`` line
per live item key (still wrapped under its subject's key), then one ``{"record": "event",
...}`` line per event in position order (content still sealed; with its hash chain, which
an import verifies first: see :mod:`.chain_export`). A destroyed key is in no export, so
neither is any content it sealed. Importing into an empty store with the same master key,
then rebuilding, reproduces the projection exactly; that is how a store moves from SQLite
to PostgreSQL.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any, TypeVar

from governed_memory.codec import CodecError, stored_from_json
from governed_memory.core import values
from governed_memory.core.events import StoredEvent
from governed_memory.errors import CryptoError, ValidationError
from governed_memory.ports import Store
from governed_memory.records import ItemKey, SubjectKey
from governed_memory.service.carried import (
    CARRIED,
    CarriedLoader,
    api_key_from,
    carried_records,
    idempotency_from,
)
from governed_memory.service.chain_export import ExportChain, event_record
from governed_memory.service.indexing import Indexer
from governed_memory.service.progress import OnStep, counted, rebuild_steps, silent
from governed_memory.service.reindex import OnProgress, Rebuild
from governed_memory.service.vault import Vault

IMPORT_CHUNK = 5_000
K = TypeVar("K", SubjectKey, ItemKey)


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import added."""

    events: int
    subject_keys: int
    items: int
    item_keys: int = 0
    api_keys: int = 0
    idempotency_records: int = 0


class Maintenance:
    """Whole-store operations over one store and its vault: ``service.maintenance``."""

    def __init__(self, store: Store, vault: Vault, indexer: Indexer) -> None:
        self._store = store
        self._vault = vault
        self._indexer = indexer

    def rebuild(self, on_progress: OnProgress | None = None) -> int:
        """Replace every tenant's projection and postings with the fold of its log; the
        number of items.

        Searchable items need their plaintext to be indexed again: every active item is
        decrypted with its keys (see :mod:`.reindex`).
        """
        return Rebuild(self._store, self._vault, self._indexer, on_progress).run()

    def reindex(self, on_progress: OnProgress | None = None) -> int:
        """Rebuild the search index (and the projection) under this service's search
        settings, and record them as the index's: ``gmem reindex`` (see :mod:`.reindex`)."""
        return Rebuild(self._store, self._vault, self._indexer, on_progress).reindex()

    def export(self, credentials: bool = True) -> Iterator[dict[str, Any]]:
        """Every live subject key, every live item key, every event, then (unless not
        ``credentials``) every API key and idempotency record (see :mod:`.carried`), as
        JSON-ready records.

        Everything is read from one snapshot of the store: a forget committing during the
        export must not leave the export holding both a destroyed key and its ciphertext.
        """
        with self._store.snapshot():
            for key in self._store.subject_keys():
                yield _key_record("subject_key", key)
            for item in self._store.item_keys():
                yield _key_record("item_key", item)
            after = 0
            while True:
                page = self._store.chain_links(None, after, IMPORT_CHUNK)
                for link in page:
                    yield event_record(link)  # its stored columns and chain hashes
                if len(page) < IMPORT_CHUNK:
                    break
                after = page[-1].position
            if credentials:
                yield from carried_records(self._store)

    def import_log(self, lines: Iterable[str], on_step: OnStep = silent) -> ImportReport:
        """Load an export into an empty store, then rebuild the projection.

        The whole export is validated first (every record decodes, keys unwrap under this
        master key, positions strictly increase) and spooled to a temporary file; only
        then is anything written, so a bad line cannot leave a partial, append-only log.
        ``on_step`` is told of the stages "check", "load" and "rebuild".
        """
        if self._store.head() != 0 or next(self._store.subject_keys(limit=1), None):
            raise ValidationError("import needs an empty store: this one already has data")
        with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
            checked = self._validate_into(counted(lines, on_step, "check"), spool)
            spool.seek(0)
            counts = self._load(counted(spool, on_step, "load", checked))
        items = self.rebuild(rebuild_steps(on_step))
        return ImportReport(
            counts["event"],
            counts["subject_key"],
            items,
            counts["item_key"],
            counts["api_key"],
            counts["idempotency"],
        )

    def _load(self, spool: Iterable[str]) -> dict[str, int]:
        """Write a validated export's keys, events and carried records, in chunks; how many
        records of each type it held (item keys come before the events)."""
        counts = dict.fromkeys(("subject_key", "item_key", "event", *CARRIED), 0)
        item_keys: list[ItemKey] = []
        events: list[StoredEvent] = []
        carried = CarriedLoader(self._store, IMPORT_CHUNK)
        for line in spool:
            data = json.loads(line)
            record = data.pop("record")
            counts[record] += 1
            if record == "subject_key":
                self._store.add_subject_key(_key_from(SubjectKey, data))
            elif record == "item_key":
                item_keys.append(_key_from(ItemKey, data))
            elif record in CARRIED:
                carried.add(record, data)
            else:
                events.append(stored_from_json(data))
            if item_keys and (events or len(item_keys) >= IMPORT_CHUNK):
                self._store.import_item_keys(item_keys)
                item_keys = []
            if len(events) >= IMPORT_CHUNK:
                self._store.import_events(events)
                events = []
        if item_keys:
            self._store.import_item_keys(item_keys)
        if events:
            self._store.import_events(events)
        carried.flush()
        return counts

    def _validate_into(self, lines: Iterable[str], spool: IO[str]) -> int:
        """Check every record of an export; copy the valid ones to ``spool``; raise on the
        first bad one, naming its line; how many records it copied."""
        last = copied = 0
        subjects: dict[tuple[str, str], SubjectKey] = {}
        chain = ExportChain()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                last = self._check_record(data, last, subjects)
            except (
                ValueError,
                TypeError,
                KeyError,
                CodecError,
                CryptoError,
                ValidationError,
            ) as error:
                detail = error.detail if isinstance(error, CryptoError) else type(error).__name__
                raise ValidationError(
                    f"line {number} is not a valid export record ({detail})"
                ) from None
            if data["record"] == "event":
                chain.follow(number, data)  # each tenant's hash chain, unbroken
            spool.write(line.rstrip("\n") + "\n")
            copied += 1
        return copied

    def _check_record(
        self, data: object, last: int, subjects: dict[tuple[str, str], SubjectKey]
    ) -> int:
        """Raise unless ``data`` is a valid record following position ``last``; the last
        event position so far. ``subjects`` collects the subject keys met so far: an item
        key must unwrap under one of them."""
        if not isinstance(data, dict):
            raise TypeError
        record = data.get("record")
        body = {k: v for k, v in data.items() if k != "record"}
        if record == "subject_key":
            key = _key_from(SubjectKey, body)
            self._vault.check_wrapped(key)  # the master key must match
            subjects[(key.tenant_id, key.subject_id)] = key
            return last
        if record == "item_key":
            item = _key_from(ItemKey, body)
            subject = subjects.get((item.tenant_id, item.subject_id))
            if subject is None:
                raise ValidationError("an item key without its subject's key")
            self._vault.check_item_key(subject, item)
            return last
        if record in CARRIED:
            (api_key_from if record == "api_key" else idempotency_from)(body)
            return last
        if record != "event":
            raise TypeError
        position = stored_from_json(body).position
        if position <= last:
            raise ValueError
        return position


#: How the text fields of a key record are checked when it is imported.
_KEY_FIELDS: dict[str, Callable[[object], str]] = {
    "tenant_id": values.tenant_id,
    "subject_id": values.subject_id,
    "memory_id": values.memory_id,
}


def _key_record(record: str, key: SubjectKey | ItemKey) -> dict[str, Any]:
    """A key as an export record: its ids as text, its bytes in base64."""
    fields = dataclasses.asdict(key)
    return {"record": record} | {
        name: base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value
        for name, value in fields.items()
    }


def _key_from(cls: type[K], data: dict[str, Any]) -> K:
    """The key an export record holds, every field checked; ``ValidationError`` if not."""
    try:
        values_of: dict[str, Any] = {
            f.name: _KEY_FIELDS[f.name](data[f.name])
            if f.name in _KEY_FIELDS
            else base64.b64decode(data[f.name], validate=True)
            for f in dataclasses.fields(cls)
        }
    except (KeyError, TypeError, binascii.Error) as error:
        name = cls.__name__.replace("Key", " key").lower()
        raise ValidationError(f"malformed {name} record: {type(error).__name__}") from None
    return cls(**values_of)
