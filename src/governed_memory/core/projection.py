"""The projection: ``apply`` folds one event into an item, ``replay`` folds a whole log.

Deterministic by construction: every value comes from the events, none from a clock or a
random source, so replaying the same log always yields the same items.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime

from governed_memory.core.events import (
    Event,
    MemoryContentDestroyed,
    MemoryErased,
    MemoryExpired,
    MemoryPromoted,
    MemoryRejected,
    MemorySuperseded,
    MemoryWritten,
    StoredEvent,
    SubjectForgotten,
)
from governed_memory.core.model import ItemState
from governed_memory.core.values import Status, Trust

ItemKey = tuple[str, str]


class ProjectionError(Exception):
    """The log cannot be folded: an event refers to an item in an impossible state."""


def apply(item: ItemState | None, event: Event) -> ItemState:
    """The item after ``event`` (a single-item event; see :func:`apply_forget`)."""
    if isinstance(event, MemoryWritten):
        return _written(item, event)
    if isinstance(event, SubjectForgotten):
        raise ProjectionError("subject.forgotten changes many items; use apply_forget")
    if item is None:
        raise ProjectionError(f"{event.type} at version {event.version} for an unknown item")
    if event.version != item.version + 1:
        raise ProjectionError(
            f"{event.type} produces version {event.version} but the item is at {item.version}"
        )
    version, at = event.version, event.occurred_at
    if isinstance(event, MemoryPromoted):
        return dataclasses.replace(
            item, status=Status.ACTIVE, trust=Trust.VERIFIED, version=version, updated_at=at
        )
    if isinstance(event, MemoryRejected):
        return dataclasses.replace(item, status=Status.REJECTED, version=version, updated_at=at)
    if isinstance(event, MemorySuperseded):
        return dataclasses.replace(
            item,
            status=Status.SUPERSEDED,
            superseded_by=event.superseded_by,
            version=version,
            updated_at=at,
        )
    if isinstance(event, MemoryExpired):
        return dataclasses.replace(item, status=Status.EXPIRED, version=version, updated_at=at)
    if isinstance(event, MemoryErased):
        return _without_content(item, Status.DELETED, version, at)
    if isinstance(event, MemoryContentDestroyed):
        return _without_content(item, item.status, version, at)
    raise ProjectionError(f"unknown event type {type(event).__name__}")


def _without_content(item: ItemState, status: Status, version: int, at: datetime) -> ItemState:
    """``item`` at ``status`` with its content gone: no blob, and no token count either,
    which would tell the content's length (the log's ``memory.written`` still does)."""
    return dataclasses.replace(
        item, status=status, content=None, tokens=0, version=version, updated_at=at
    )


def _written(item: ItemState | None, event: MemoryWritten) -> ItemState:
    expected = 1 if item is None else item.version + 1
    if event.version != expected:
        raise ProjectionError(f"memory.written produces version {event.version}, not {expected}")
    return ItemState(
        tenant_id=event.tenant_id,
        id=event.memory_id,
        agent_id=event.agent_id,
        subject_id=event.subject_id,
        purpose=event.purpose,
        kind=event.kind,
        content=event.content,
        content_version=event.version,
        content_hash=event.content_hash,
        provenance=event.provenance,
        trust=event.trust,
        confidence=event.confidence,
        created_at=event.occurred_at if item is None else item.created_at,
        updated_at=event.occurred_at,
        expires_at=event.expires_at,
        version=event.version,
        status=event.status,
        supersedes_id=event.supersedes_id,
        superseded_by=None if item is None else item.superseded_by,
        written_by=event.actor,
        tokens=event.tokens,
    )


def apply_forget(items: Iterable[ItemState], event: SubjectForgotten) -> list[ItemState]:
    """Every not-yet-deleted item of the event's subject, now deleted and without content."""
    return [
        _without_content(item, Status.DELETED, item.version + 1, event.occurred_at)
        for item in items
        if item.tenant_id == event.tenant_id
        and item.subject_id == event.subject_id
        and item.status is not Status.DELETED
    ]


class Projection:
    """An in-memory fold of a log, indexed by subject so forgetting stays cheap."""

    def __init__(self) -> None:
        self.items: dict[ItemKey, ItemState] = {}
        self._by_subject: dict[tuple[str, str], set[str]] = {}

    def fold(self, event: Event) -> list[ItemState]:
        """Apply one event; return the items it changed."""
        if isinstance(event, SubjectForgotten):
            ids = self._by_subject.get((event.tenant_id, event.subject_id), set())
            changed = apply_forget((self.items[(event.tenant_id, i)] for i in sorted(ids)), event)
        else:
            key = (event.tenant_id, event.memory_id)
            changed = [apply(self.items.get(key), event)]
        for item in changed:
            previous = self.items.get(item.key)
            if previous is not None and previous.subject_id != item.subject_id:
                self._by_subject[(item.tenant_id, previous.subject_id)].discard(item.id)
            self.items[item.key] = item
            self._by_subject.setdefault((item.tenant_id, item.subject_id), set()).add(item.id)
        return changed


def replay(events: Iterable[Event]) -> dict[ItemKey, ItemState]:
    """The projection of a log: every item as the events leave it."""
    projection = Projection()
    for event in events:
        projection.fold(event)
    return projection.items


def versions_of(
    memory_id: str, log: Iterable[StoredEvent]
) -> Iterator[tuple[StoredEvent, ItemState]]:
    """Every event of ``log`` that changed the item, with the item as that event left it.

    ``log`` holds the item's events and its subject's forgets (``memory_events``).
    """
    projection = Projection()
    for stored in log:
        for item in projection.fold(stored.event):
            if item.id == memory_id:
                yield stored, item


def diff(
    expected: Mapping[ItemKey, ItemState], actual: Mapping[ItemKey, ItemState]
) -> Iterator[str]:
    """Describe, item by item and field by field, how ``actual`` differs from ``expected``."""
    for key in sorted(expected.keys() | actual.keys()):
        want, have = expected.get(key), actual.get(key)
        if want is None:
            yield f"{key[0]}/{key[1]}: in the projection but not produced by the log"
        elif have is None:
            yield f"{key[0]}/{key[1]}: produced by the log but missing from the projection"
        elif want != have:
            fields = [
                f.name
                for f in dataclasses.fields(want)
                if getattr(want, f.name) != getattr(have, f.name)
            ]
            yield f"{key[0]}/{key[1]}: fields differ: {', '.join(fields)}"
