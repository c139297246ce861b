"""The in-memory reference store: the simplest correct implementation of the store port.

Used by tests and as the executable definition of what every backend must do. One lock
makes each batch atomic and keeps positions in commit order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime

from governed_memory.core.events import StoredEvent, SubjectForgotten
from governed_memory.core.model import LIVE_STATUSES, ItemState, effective_status
from governed_memory.core.policy import RetentionKey
from governed_memory.core.values import Status, to_micros
from governed_memory.errors import (
    IdempotencyKeyTaken,
    ReadWouldWait,
    SubjectChanged,
    SubjectKeyGone,
    VersionConflict,
)
from governed_memory.records import (
    Batch,
    BrowseRequest,
    ChainLink,
    IdempotencyRecord,
    IntactCheck,
    NothingIntact,
    RetentionCursor,
    SubjectKey,
    TenantRebuild,
)
from governed_memory.store.chain_links import MemoryChain
from governed_memory.store.memory_search import MemorySearch


class MemoryStore(MemorySearch):
    """Everything in dictionaries behind one lock; nothing survives the process."""

    def __init__(self) -> None:
        super().__init__()
        self._events: list[StoredEvent] = []
        self._items: dict[tuple[str, str], ItemState] = {}
        self._idempotency: dict[tuple[str, str, str], IdempotencyRecord] = {}
        self._chain = MemoryChain()

    # -- writes ---------------------------------------------------------------------------

    def commit(self, batch: Batch) -> list[StoredEvent]:
        with self._lock:
            self._check(batch)
            stored = []
            for event in batch.events:
                entry = StoredEvent(len(self._events) + 1, event)
                self._events.append(entry)
                stored.append(entry)
            self._chain.append(stored)
            for change in batch.changes:
                self._items[change.item.key] = change.item
                self._reindex(change.item, change.index)
            if batch.idempotency is not None:
                record = batch.idempotency
                position = stored[0].position if stored else None
                where = (batch.tenant_id, record.credential, record.key)
                self._idempotency[where] = dataclasses.replace(
                    record, tenant_id=batch.tenant_id, position=position
                )
            self._change_item_keys(batch)
            return stored

    def _check(self, batch: Batch) -> None:
        self._check_index(batch.index_signature)
        if batch.idempotency is not None:
            record = batch.idempotency
            existing = self._idempotency.get((batch.tenant_id, record.credential, record.key))
            if existing is not None:
                raise IdempotencyKeyTaken(existing)
        if batch.require_key is not None:
            key = batch.require_key
            held = self._keys.get((key.tenant_id, key.subject_id))
            if held is None or held.key_id != key.key_id:
                raise SubjectKeyGone(f"subject key of tenant {key.tenant_id!r} was destroyed")
        for change in batch.changes:
            current = self._items.get(change.item.key)
            version = 0 if current is None else current.version
            if version != change.expected_version:
                raise VersionConflict(change.item.id, change.expected_version, version)
        if batch.destroy_key is not None:
            deleting = {change.item.id for change in batch.changes}
            for item in self._items.values():
                if (
                    item.tenant_id == batch.tenant_id
                    and item.subject_id == batch.destroy_key
                    and item.status is not Status.DELETED
                    and item.id not in deleting
                ):
                    raise SubjectChanged(f"subject of tenant {batch.tenant_id!r} changed")

    def _change_item_keys(self, batch: Batch) -> None:
        tenant = batch.tenant_id
        if batch.new_item_key is not None:
            key = batch.new_item_key
            self._item_keys[(key.tenant_id, key.memory_id)] = key
        if batch.destroy_item_key is not None:
            self._item_keys.pop((tenant, batch.destroy_item_key), None)
        if batch.destroy_key is not None:
            self._keys.pop((tenant, batch.destroy_key), None)
            for found in [k for k, v in self._item_keys.items() if k[0] == tenant]:
                if self._item_keys[found].subject_id == batch.destroy_key:
                    del self._item_keys[found]

    # -- reads ----------------------------------------------------------------------------

    def write_state(
        self, tenant_id: str, subject_id: str, memory_id: str
    ) -> tuple[SubjectKey | None, ItemState | None]:
        return self.subject_key(tenant_id, subject_id), self.get(tenant_id, memory_id)

    def get(self, tenant_id: str, memory_id: str) -> ItemState | None:
        with self._lock:
            return self._items.get((tenant_id, memory_id))

    def get_many(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, ItemState]:
        with self._lock:
            found = (self._items.get((tenant_id, i)) for i in memory_ids)
            return {item.id: item for item in found if item is not None}

    def subject_items(self, tenant_id: str, subject_id: str) -> list[ItemState]:
        with self._lock:
            return sorted(
                (
                    item
                    for item in self._items.values()
                    if item.tenant_id == tenant_id and item.subject_id == subject_id
                ),
                key=lambda item: item.id,
            )

    def idempotency(self, tenant_id: str, credential: str, key: str) -> IdempotencyRecord | None:
        with self._lock:
            return self._idempotency.get((tenant_id, credential, key))

    def idempotency_records(
        self, after: tuple[str, str, str] | None, limit: int
    ) -> list[IdempotencyRecord]:
        with self._lock:
            keys = sorted(k for k in self._idempotency if after is None or k > after)
            return [self._idempotency[k] for k in keys[:limit]]

    def import_idempotency(self, records: Sequence[IdempotencyRecord]) -> None:
        with self._lock:
            where = [(r.tenant_id, r.credential, r.key) for r in records]
            if any(w in self._idempotency for w in where) or len(set(where)) < len(where):
                raise ValueError("an idempotency record is stored already")
            self._idempotency.update(zip(where, records, strict=True))

    def events_after(self, tenant_id: str | None, after: int, limit: int) -> list[StoredEvent]:
        with self._lock:
            tail = self._events[max(after, 0) :]
            matching = (e for e in tail if tenant_id is None or e.event.tenant_id == tenant_id)
            return [e for _, e in zip(range(limit), matching, strict=False)]

    def events_before(self, tenant_id: str, before: int | None, limit: int) -> list[StoredEvent]:
        with self._lock:
            head = self._events if before is None else self._events[: max(before - 1, 0)]
            matching = (e for e in reversed(head) if e.event.tenant_id == tenant_id)
            return [e for _, e in zip(range(limit), matching, strict=False)]

    def memory_events(self, tenant_id: str, memory_id: str, subject_id: str) -> list[StoredEvent]:
        with self._lock:
            return [
                e
                for e in self._events
                if e.event.tenant_id == tenant_id
                and (
                    e.event.memory_id == memory_id
                    or (isinstance(e.event, SubjectForgotten) and e.event.subject_id == subject_id)
                )
            ]

    def due_for_expiry(self, now: datetime, limit: int) -> list[ItemState]:
        with self._lock:
            due = [
                item
                for item in self._items.values()
                if item.status in LIVE_STATUSES and item.expires_at <= now
            ]
            due.sort(key=lambda item: (item.expires_at, item.tenant_id, item.id))
            return due[:limit]

    def due_for_retention(
        self, cutoffs: Mapping[RetentionKey, datetime], limit: int, after: RetentionCursor | None
    ) -> list[ItemState]:
        with self._lock:
            due = [
                item
                for item in self._items.values()
                if item.content is not None
                and (item.kind, item.status) in cutoffs
                and item.updated_at <= cutoffs[(item.kind, item.status)]
                and (after is None or _retention_cursor(item) > after)
            ]
            due.sort(key=_retention_cursor)
            return due[:limit]

    def quarantine(
        self,
        tenant_id: str,
        agents: frozenset[str] | None,
        agent_id: str | None,
        purpose: str | None,
        limit: int,
        after: tuple[int, str] | None,
        now: datetime | None = None,
    ) -> list[ItemState]:
        with self._lock:
            rows = [
                item
                for item in self._items.values()
                if item.tenant_id == tenant_id
                and item.status is Status.QUARANTINED
                and (now is None or item.expires_at > now)
                and (agents is None or item.agent_id in agents)
                and (agent_id is None or item.agent_id == agent_id)
                and (purpose is None or item.purpose == purpose)
                and (after is None or (to_micros(item.updated_at), item.id) > after)
            ]
            rows.sort(key=lambda item: (to_micros(item.updated_at), item.id))
            return rows[:limit]

    def browse(self, request: BrowseRequest) -> list[ItemState]:
        with self._lock:
            rows = [
                item
                for item in self._items.values()
                if item.tenant_id == request.tenant_id and _browsed(item, request)
            ]
            rows.sort(
                key=lambda item: (to_micros(item.updated_at), item.id),
                reverse=request.newest_first,
            )
            return rows[: request.limit]

    # -- whole-log access -----------------------------------------------------------------

    def tenants(self) -> list[str]:
        with self._lock:
            return sorted({e.event.tenant_id for e in self._events})

    def tenant_events(self, tenant_id: str) -> Iterator[StoredEvent]:
        with self._lock:
            events = [e for e in self._events if e.event.tenant_id == tenant_id]
        return iter(events)

    def tenant_items(self, tenant_id: str) -> Iterator[ItemState]:
        with self._lock:
            items = [item for key, item in self._items.items() if key[0] == tenant_id]
        return iter(sorted(items, key=lambda item: item.id))

    def head(self) -> int:
        with self._lock:
            return len(self._events)

    def import_events(self, events: Sequence[StoredEvent]) -> None:
        with self._lock:
            head = len(self._events)
            for offset, stored in enumerate(events, start=1):
                if stored.position != head + offset:
                    raise ValueError("the memory store imports contiguous positions only")
            self._events.extend(events)
            self._chain.append(events)

    def chain_links(self, tenant_id: str | None, after: int, limit: int) -> list[ChainLink]:
        with self._lock:
            return self._chain.after(tenant_id, after, limit)

    def rebuilding(self) -> AbstractContextManager[None]:
        return nullcontext()

    def check_intact(self, tenants: Sequence[str]) -> IntactCheck:
        return NothingIntact()  # nothing to gain: the fold and the rows are in this process

    def rebuild(self, tenants: Sequence[TenantRebuild]) -> set[str]:
        with self._lock:
            heads: dict[str, int] = {}
            for stored in self._events:
                heads[stored.event.tenant_id] = stored.position
            moved = {t.tenant_id for t in tenants if heads.get(t.tenant_id, 0) != t.through}
            swapped = {t.tenant_id for t in tenants} - moved
            for key in [k for k in self._items if k[0] in swapped]:
                self._reindex(self._items.pop(key), None)
            for tenant in tenants:
                if tenant.tenant_id in swapped:
                    for change in tenant.changes:
                        self._items[change.item.key] = change.item
                        self._reindex(change.item, change.index)
            return moved

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        with self._lock:  # writers wait: every read inside sees one state
            yield

    #: Reads take the store's lock, which a writer may hold.
    prompt_searches = False

    @contextmanager
    def prompt(self) -> Iterator[None]:
        """Reads take the store's lock, which a writer may hold: refused at once."""
        raise ReadWouldWait("the in-memory store's reads may wait for its lock")
        yield  # pragma: no cover - a generator, never reached

    def schema_version(self) -> int:
        return 0  # nothing to migrate: the store lives and dies with the process

    def ping(self) -> None:
        return None

    def close(self) -> None:
        return None


def _retention_cursor(item: ItemState) -> RetentionCursor:
    return (to_micros(item.updated_at), item.tenant_id, item.id)


def _browsed(item: ItemState, request: BrowseRequest) -> bool:
    """Whether ``item`` of the request's tenant passes every filter of a browse."""
    return (
        (request.agents is None or item.agent_id in request.agents)
        and request.agent_id in (None, item.agent_id)
        and request.purpose in (None, item.purpose)
        and request.subject_id in (None, item.subject_id)
        and request.kind in (None, item.kind)
        and request.status in (None, effective_status(item, request.now))
        and (request.after is None or _beyond((to_micros(item.updated_at), item.id), request))
    )


def _beyond(position: tuple[int, str], request: BrowseRequest) -> bool:
    """Whether an item at ``position`` comes after the request's cursor, in its order."""
    assert request.after is not None
    return position < request.after if request.newest_first else position > request.after
