"""The hash chain in the stores, written once: linking events as they are appended.

Each backend links an event where it decides the event's place in the log, inside the
write transaction (see :mod:`governed_memory.chain` for the hashes): SQLite and the
imports of both backends here in Python, under the write lock; PostgreSQL's group commit
in SQL (``sql.INSERT_EVENT``), since a batch goes out in one pipeline. A tenant's head is
the hash of its last event, read through the ``(tenant_id, position)`` index.

Events written before the chain existed are linked by migration 8 (:func:`fill`), in the
transaction of the migration, so an old store verifies clean from its first start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from governed_memory.chain import GENESIS, next_hash
from governed_memory.codec import EVENT_COLUMNS, canonical_columns
from governed_memory.codec import event_columns as _stored_columns
from governed_memory.core.events import Event, StoredEvent
from governed_memory.records import ChainLink

#: The migration that adds the chain's columns and links every event already stored.
CHAIN_MIGRATION = 8
_TENANT = EVENT_COLUMNS.index("tenant_id")


def event_columns(event: Event) -> tuple[Any, ...]:
    """The stored columns of ``event`` (what its digest covers)."""
    return _stored_columns(event)


class Heads:
    """The tenants' chain heads during one write: each read from the store once, then
    advanced by every event linked."""

    def __init__(self, read: Callable[[str], bytes | None]) -> None:
        self._read = read
        self._heads: dict[str, bytes] = {}

    def known(self, tenant_id: str, head: bytes | None) -> None:
        """The tenant's head as the caller read it from the store (``None``: no event yet),
        read in the same transaction as :meth:`link` would have read it."""
        self._heads[tenant_id] = head or GENESIS

    def link(self, tenant_id: str, columns: Sequence[Any]) -> tuple[bytes, bytes]:
        """The previous hash and the hash of the tenant's next event, now its head."""
        previous = self._heads.get(tenant_id)
        if previous is None:
            previous = self._read(tenant_id) or GENESIS
        current = next_hash(previous, columns)
        self._heads[tenant_id] = current
        return previous, current


def link_from_row(row: Sequence[Any]) -> ChainLink:
    """A link from a row of ``position``, the event columns (``codec.SPLIT_COLUMNS`` too
    in a compact log: the link holds the canonical columns), ``prev_hash``, ``hash``."""
    stored = tuple(row[1:-2])
    try:
        columns = canonical_columns(stored)
    except (TypeError, ValueError):  # only an edited row: it then fails to verify, as stored
        columns = stored[: len(EVENT_COLUMNS)]
    prev_hash, hash_ = row[-2:]
    return ChainLink(
        int(row[0]), columns[_TENANT], columns, _bytes_or_none(prev_hash), _bytes_or_none(hash_)
    )


def _bytes_or_none(value: object) -> bytes | None:
    """A stored hash as bytes; a value of another type (only a hand-edited row holds one)
    becomes bytes that match no hash, so that verifying reports it instead of failing."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return repr(value).encode("utf-8", "backslashreplace")


def fill(rows: Iterable[Sequence[Any]], update: Callable[[list[tuple[Any, ...]]], object]) -> int:
    """Link events stored before the chain existed: ``rows`` are ``position`` and the event
    columns, in position order; ``update`` stores ``(prev_hash, hash, position)`` tuples.
    How many events it linked."""
    heads = Heads(lambda tenant: None)
    pending: list[tuple[Any, ...]] = []
    count = 0
    for row in rows:
        columns = tuple(row[1:])
        pending.append((*heads.link(columns[_TENANT], columns), row[0]))
        count += 1
        if len(pending) >= 1000:
            update(pending)
            pending = []
    if pending:
        update(pending)
    return count


class MemoryChain:
    """The chain of the in-memory store: links kept beside its events."""

    def __init__(self) -> None:
        self.links: list[ChainLink] = []
        self._heads = Heads(lambda tenant: None)

    def append(self, events: Iterable[StoredEvent]) -> None:
        """Link events the store has just appended (its lock held)."""
        for stored in events:
            columns = event_columns(stored.event)
            prev, current = self._heads.link(stored.event.tenant_id, columns)
            self.links.append(
                ChainLink(stored.position, stored.event.tenant_id, columns, prev, current)
            )

    def after(self, tenant_id: str | None, after: int, limit: int) -> list[ChainLink]:
        found = [
            link
            for link in self.links
            if link.position > after and tenant_id in (None, link.tenant_id)
        ]
        return found[:limit]


__all__ = [
    "CHAIN_MIGRATION",
    "Heads",
    "MemoryChain",
    "event_columns",
    "fill",
    "link_from_row",
]
