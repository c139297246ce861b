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

import json
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from governed_memory.codec import stored_from_json
from governed_memory.core.events import StoredEvent
from governed_memory.errors import ValidationError
from governed_memory.ports import Store, holds_log
from governed_memory.records import ItemKey, SubjectKey
from governed_memory.service.carried import CARRIED, CarriedLoader, carried_records
from governed_memory.service.chain_export import event_record
from governed_memory.service.import_check import ExportCheck
from governed_memory.service.indexing import Indexer
from governed_memory.service.keyrecords import key_from, key_record
from governed_memory.service.progress import OnStep, counted, rebuild_steps, silent
from governed_memory.service.reindex import OnProgress, Rebuild
from governed_memory.service.vault import Vault

IMPORT_CHUNK = 5_000


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

        An active item whose content the index already holds (same content version and
        hash) keeps its held document, unopened; only the others (and all of them with
        semantic recall on) are decrypted and indexed again (see :mod:`.reindex`). A
        document that drifted from its content is therefore kept: :meth:`reindex` repairs it.
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
                yield key_record("subject_key", key)
            for item in self._store.item_keys():
                yield key_record("item_key", item)
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
        master key, positions strictly increase, nothing comes twice: see
        :mod:`.import_check`) and spooled to a temporary file; only then is anything
        written, so a bad line cannot leave a partial, append-only log. Just before the
        first write the store is bound to this master key (a store opened without binding,
        as ``gmem import`` opens it, stays unbound if the export is refused) and found
        empty again. ``on_step`` is told of the stages "check", "load" and "rebuild".
        """
        self._refuse_unless_empty()
        with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
            checked = ExportCheck(self._vault).into(counted(lines, on_step, "check"), spool)
            self._vault.bind()  # the export is wrapped under this key: bind the store to it
            self._refuse_unless_empty()  # a slow export: another writer may have come
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

    def _refuse_unless_empty(self) -> None:
        if holds_log(self._store):
            raise ValidationError("import needs an empty store: this one already has data")

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
                self._store.add_subject_key(key_from(SubjectKey, data))
            elif record == "item_key":
                item_keys.append(key_from(ItemKey, data))
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
