"""The hash chain in exports: event records carry it, and an import verifies it.

An exported event record holds the event's columns as stored (the payload as JSON, its
sealed content still base64 ciphertext) with ``prev_hash`` and ``hash`` in hex. Before an
import writes anything, :class:`ExportChain` follows every tenant's chain through the
records and refuses the first that breaks it, naming its line, tenant and position.

An export made before the chain existed has no hashes at all and is imported as before
(the store chains the events as it writes them); one that has them on some events only
is refused. Like the chain in the store, the hashes are not secret: they prove that an
export is the one whose heads were recorded (``gmem audit head``), not who made it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from governed_memory.chain import GENESIS, next_hash
from governed_memory.codec import EVENT_COLUMNS, stored_event_from_row
from governed_memory.errors import ValidationError
from governed_memory.records import ChainLink
from governed_memory.service.chain_audit import EDITED, MISPLACED

_PAYLOAD = EVENT_COLUMNS.index("payload")


def event_record(link: ChainLink) -> dict[str, Any]:
    """An event as an export record: its stored columns and its chain hashes.

    The row is decoded first, as the export always did, so that a row the codec refuses
    fails the export rather than the import."""
    stored_event_from_row((link.position, *link.columns))
    record: dict[str, Any] = {"record": "event", "position": link.position}
    record.update(zip(EVENT_COLUMNS, link.columns, strict=True))
    record["payload"] = json.loads(link.columns[_PAYLOAD])
    if link.prev_hash is not None and link.hash is not None:
        record["prev_hash"], record["hash"] = link.prev_hash.hex(), link.hash.hex()
    return record


def _columns(record: Mapping[str, Any]) -> tuple[Any, ...]:
    """The stored columns an exported event record stands for (the payload as stored)."""
    columns = [record[name] for name in EVENT_COLUMNS]
    columns[_PAYLOAD] = json.dumps(record["payload"], separators=(",", ":"), sort_keys=True)
    return tuple(columns)


class ExportChain:
    """Follows each tenant's chain through an export's event records, in file order."""

    def __init__(self) -> None:
        self._heads: dict[str, bytes] = {}
        self._chained: bool | None = None  # whether the export carries hashes

    def follow(self, number: int, record: Mapping[str, Any]) -> None:
        """Check the event record on line ``number`` (already valid otherwise); raise
        ``ValidationError`` naming the line if it breaks its tenant's chain."""
        chained = "prev_hash" in record or "hash" in record
        if self._chained is None:
            self._chained = chained
        if chained != self._chained:
            raise ValidationError(
                f"line {number} {'has' if chained else 'lacks'} the chain hashes that the "
                "export's first event record "
                f"{'lacks' if chained else 'has'}: the export was edited"
            )
        if not chained:
            return
        tenant, position = record["tenant_id"], record["position"]
        problem = self._problem(tenant, record)
        if problem is not None:
            raise ValidationError(
                f"line {number} breaks the hash chain of tenant {tenant!r} at position "
                f"{position}: {problem}; nothing was imported"
            )

    def _problem(self, tenant: str, record: Mapping[str, Any]) -> str | None:
        previous = self._heads.get(tenant, GENESIS)
        try:
            prev_hash = bytes.fromhex(record["prev_hash"])
            hash_ = bytes.fromhex(record["hash"])
        except (TypeError, ValueError):
            return "its chain hashes are not hexadecimal"
        if prev_hash != previous:
            return MISPLACED
        try:
            computed = next_hash(previous, _columns(record))
        except TypeError:  # a column of a type no store writes
            return EDITED
        if computed != hash_:
            return EDITED
        self._heads[tenant] = hash_
        return None


__all__ = ["ExportChain", "event_record"]
