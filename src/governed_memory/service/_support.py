"""What the use cases share: fresh ids, events folded into rows, and telling who listens."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from governed_memory.core.events import Event, ItemEvent, StoredEvent
from governed_memory.core.lifecycle import Context
from governed_memory.core.model import ItemState, Principal
from governed_memory.core.projection import apply
from governed_memory.core.values import Status
from governed_memory.errors import StoreUnavailable
from governed_memory.records import Batch, IndexDoc, ItemChange

if TYPE_CHECKING:  # types only: these modules build on what is here
    from governed_memory.ports import Store
    from governed_memory.service.idempotency import Idempotency, Keyed
    from governed_memory.service.indexing import Indexer
    from governed_memory.service.vault import Vault

log = logging.getLogger("governed_memory.service")

R = TypeVar("R")

#: How often a command is decided again when the state moves under it before it commits.
MAX_RETRIES = 3

#: Told about every batch of events once it has committed (metrics, for one).
Listener = Callable[[Sequence[Event]], None]
#: Commits one batch and tells the listeners: what every use case ends with.
Commit = Callable[[Batch], list[StoredEvent]]
#: The decision context of a request by a principal (with its idempotency key, if any).
ContextOf = Callable[[Principal, "Keyed[Any] | None"], Context]


@dataclass(frozen=True, slots=True)
class Parts:
    """What a use case of the service works with: the store, the vault, the idempotency
    protocol, the commit that tells the listeners, the context of a decision, and what
    makes search entries."""

    store: Store
    vault: Vault
    idempotency: Idempotency
    commit: Commit
    context: ContextOf
    indexer: Indexer


class UseCase:
    """A use case of the service, over the :class:`Parts` it works with."""

    def __init__(self, parts: Parts) -> None:
        self._store = parts.store
        self._vault = parts.vault
        self._idempotency = parts.idempotency
        self._commit = parts.commit
        self._context = parts.context
        self._indexer = parts.indexer


def new_id() -> str:
    """A UUIDv7-layout id: time-ordered, so new rows land on the B-tree's last page."""
    millis = time.time_ns() // 1_000_000
    value = (millis & ((1 << 48) - 1)) << 80 | secrets.randbits(80)
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    # str(uuid.UUID(int=value)), without building the UUID object (two ids a write).
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


#: Makes the index entry of an item that is searchable after a command (given that item).
Indexing = Callable[[ItemState], IndexDoc]


def changes(
    events: Sequence[Event],
    known: Mapping[str, ItemState | None],
    indexes: Mapping[str, Indexing],
) -> list[ItemChange]:
    """Fold single-item events into projection rows, each with its postings if searchable.

    ``known`` holds the items as loaded for the decision (``None``: not there yet), and
    ``indexes`` what makes the postings of the items whose content the command set: called
    only for an item the command leaves active (a quarantined write is not analyzed).
    """
    rows = []
    states = dict(known)
    for event in events:
        assert isinstance(event, ItemEvent), "a subject-wide event changes many items"
        before = states.get(event.memory_id)
        after = apply(before, event)
        states[event.memory_id] = after
        make = indexes.get(after.id) if after.status is Status.ACTIVE else None
        index = None if make is None else make(after)
        rows.append(ItemChange(after, 0 if before is None else before.version, index))
    return rows


def announce(listeners: Sequence[Listener], events: Sequence[Event]) -> None:
    """Tell the log and every listener what committed; never any content."""
    for listener in listeners:
        try:
            listener(events)
        except Exception:
            log.exception("an event listener failed")
    if not log.isEnabledFor(logging.INFO):  # no record to build (its fields cost a write)
        return
    for event in events:
        log.info(
            "event committed",
            extra={
                "event_type": event.type,
                "tenant_id": event.tenant_id,
                "memory_id": event.memory_id,
                "version": event.version,
                "actor": event.actor,
            },
        )


def retried(attempt: Callable[[], R], *, on: tuple[type[Exception], ...], exhausted: str) -> R:
    """``attempt`` again while it raises one of ``on`` (the state moved under it before it
    committed), up to :data:`MAX_RETRIES` times; then ``StoreUnavailable(exhausted)``."""
    for _ in range(MAX_RETRIES):
        try:
            return attempt()
        except on:
            continue
    raise StoreUnavailable(exhausted)
