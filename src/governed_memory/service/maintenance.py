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
from governed_memory.core import values
from governed_memory.core.events import StoredEvent
from governed_memory.errors import CryptoError, ValidationError
from governed_memory.ports import Store
from governed_memory.records import SubjectKey
from governed_memory.service.indexing import Indexer
from governed_memory.service.reindex import OnProgress, Rebuild
from governed_memory.service.vault import Vault

IMPORT_CHUNK = 5_000


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import added."""

    events: int
    subject_keys: int
    items: int


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
        decrypted with its subject's key (see :mod:`.reindex`).
        """
        return Rebuild(self._store, self._vault, self._indexer, on_progress).run()

    def reindex(self, on_progress: OnProgress | None = None) -> int:
        """Rebuild the search index (and the projection) under this service's search
        settings, and record them as the index's: ``gmem reindex`` (see :mod:`.reindex`)."""
        return Rebuild(self._store, self._vault, self._indexer, on_progress).reindex()

    def export(self) -> Iterator[dict[str, Any]]:
        """Every live subject key, then every event, as JSON-ready records.

        Everything is read from one snapshot of the store: a forget committing during the
        export must not leave the export holding both a destroyed key and its ciphertext.
        """
        with self._store.snapshot():
            for key in self._store.subject_keys():
                yield {
                    "record": "subject_key",
                    "tenant_id": key.tenant_id,
                    "subject_id": key.subject_id,
                    "key_id": base64.b64encode(key.key_id).decode("ascii"),
                    "wrapped": base64.b64encode(key.wrapped).decode("ascii"),
                }
            after = 0
            while True:
                page = self._store.events_after(None, after, IMPORT_CHUNK)
                for stored in page:
                    yield {"record": "event"} | stored_to_json(stored)
                if len(page) < IMPORT_CHUNK:
                    return
                after = page[-1].position

    def import_log(self, lines: Iterable[str]) -> ImportReport:
        """Load an export into an empty store, then rebuild the projection.

        The whole export is validated first (every record decodes, keys unwrap under this
        master key, positions strictly increase) and spooled to a temporary file; only
        then is anything written, so a bad line cannot leave a partial, append-only log.
        """
        if self._store.head() != 0 or next(self._store.subject_keys(limit=1), None):
            raise ValidationError("import needs an empty store: this one already has data")
        with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
            self._validate_into(lines, spool)
            spool.seek(0)
            keys = events = 0
            chunk: list[StoredEvent] = []
            for line in spool:
                data = json.loads(line)
                if data.pop("record") == "subject_key":
                    self._store.add_subject_key(_subject_key(data))
                    keys += 1
                    continue
                chunk.append(stored_from_json(data))
                if len(chunk) >= IMPORT_CHUNK:
                    self._store.import_events(chunk)
                    events, chunk = events + len(chunk), []
            if chunk:
                self._store.import_events(chunk)
                events += len(chunk)
        return ImportReport(events, keys, self.rebuild())

    def _validate_into(self, lines: Iterable[str], spool: IO[str]) -> None:
        """Check every record of an export; copy the valid ones to ``spool``; raise on the
        first bad one, naming its line."""
        last = 0
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                last = self._check_record(json.loads(line), last)
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
            spool.write(line.rstrip("\n") + "\n")

    def _check_record(self, data: object, last: int) -> int:
        """Raise unless ``data`` is a valid record following position ``last``; the last
        event position so far."""
        if not isinstance(data, dict):
            raise TypeError
        record = data.get("record")
        body = {k: v for k, v in data.items() if k != "record"}
        if record == "subject_key":
            self._vault.check_wrapped(_subject_key(body))  # the master key must match
            return last
        if record != "event":
            raise TypeError
        position = stored_from_json(body).position
        if position <= last:
            raise ValueError
        return position


def _subject_key(data: dict[str, Any]) -> SubjectKey:
    try:
        return SubjectKey(
            values.tenant_id(data["tenant_id"]),
            values.subject_id(data["subject_id"]),
            base64.b64decode(data["key_id"], validate=True),
            base64.b64decode(data["wrapped"], validate=True),
        )
    except (KeyError, TypeError, binascii.Error) as error:
        raise ValidationError(f"malformed subject key record: {type(error).__name__}") from None
