"""The in-memory reference store: the simplest correct implementation of the store port.

Used by tests and as the executable definition of what every backend must do. One lock
makes each batch atomic and keeps positions in commit order.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

from governed_memory.core.events import StoredEvent, SubjectForgotten
from governed_memory.core.model import LIVE_STATUSES, ItemState
from governed_memory.core.retrieval import Candidate, ScopeStatistics, admits
from governed_memory.core.values import Status, to_micros
from governed_memory.errors import (
    IdempotencyKeyTaken,
    LogMoved,
    ReadWouldWait,
    SubjectChanged,
    SubjectKeyGone,
    VersionConflict,
)
from governed_memory.records import (
    ApiKey,
    Batch,
    IdempotencyRecord,
    IndexDoc,
    ItemChange,
    SearchMatches,
    SearchRequest,
    SubjectKey,
)

ScopeKey = tuple[str, str, str]


class MemoryStore:
    """Everything in dictionaries behind one lock; nothing survives the process."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._events: list[StoredEvent] = []
        self._items: dict[tuple[str, str], ItemState] = {}
        self._docs: dict[tuple[str, str], tuple[ScopeKey, IndexDoc]] = {}
        self._postings: dict[ScopeKey, dict[int, dict[str, int]]] = {}
        self._keys: dict[tuple[str, str], SubjectKey] = {}
        self._idempotency: dict[tuple[str, str, str], IdempotencyRecord] = {}
        self._api_keys: dict[str, ApiKey] = {}
        self._meta: dict[str, str] = {}

    # -- writes ---------------------------------------------------------------------------

    def commit(self, batch: Batch) -> list[StoredEvent]:
        with self._lock:
            self._check(batch)
            stored = []
            for event in batch.events:
                entry = StoredEvent(len(self._events) + 1, event)
                self._events.append(entry)
                stored.append(entry)
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
            if batch.destroy_key is not None:
                self._keys.pop((batch.tenant_id, batch.destroy_key), None)
            return stored

    def _check(self, batch: Batch) -> None:
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

    def _reindex(self, item: ItemState, index: IndexDoc | None) -> None:
        old = self._docs.pop(item.key, None)
        if old is not None:
            scope, doc = old
            for term in doc.terms:
                self._postings[scope][term].pop(item.id, None)
        if index is not None:
            scope = (item.tenant_id, item.agent_id, item.purpose)
            postings = self._postings.setdefault(scope, {})
            for term, frequency in index.terms.items():
                postings.setdefault(term, {})[item.id] = frequency
            self._docs[item.key] = (scope, index)

    def add_subject_key(self, key: SubjectKey) -> SubjectKey:
        with self._lock:
            return self._keys.setdefault((key.tenant_id, key.subject_id), key)

    # -- reads ----------------------------------------------------------------------------

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

    def subject_key(self, tenant_id: str, subject_id: str) -> SubjectKey | None:
        with self._lock:
            return self._keys.get((tenant_id, subject_id))

    def subject_keys_for(self, tenant_id: str, subject_ids: Sequence[str]) -> dict[str, SubjectKey]:
        with self._lock:
            found = ((s, self._keys.get((tenant_id, s))) for s in set(subject_ids))
            return {s: key for s, key in found if key is not None}

    def idempotency(self, tenant_id: str, credential: str, key: str) -> IdempotencyRecord | None:
        with self._lock:
            return self._idempotency.get((tenant_id, credential, key))

    def events_after(self, tenant_id: str | None, after: int, limit: int) -> list[StoredEvent]:
        with self._lock:
            tail = self._events[max(after, 0) :]
            matching = (e for e in tail if tenant_id is None or e.event.tenant_id == tenant_id)
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

    def quarantine(
        self,
        tenant_id: str,
        agents: frozenset[str] | None,
        agent_id: str | None,
        purpose: str | None,
        limit: int,
        after: tuple[int, str] | None,
    ) -> list[ItemState]:
        with self._lock:
            rows = [
                item
                for item in self._items.values()
                if item.tenant_id == tenant_id
                and item.status is Status.QUARANTINED
                and (agents is None or item.agent_id in agents)
                and (agent_id is None or item.agent_id == agent_id)
                and (purpose is None or item.purpose == purpose)
                and (after is None or (to_micros(item.updated_at), item.id) > after)
            ]
            rows.sort(key=lambda item: (to_micros(item.updated_at), item.id))
            return rows[:limit]

    def search(self, request: SearchRequest) -> SearchMatches:
        with self._lock:
            scope = (request.tenant_id, request.agent_id, request.purpose)
            postings = self._postings.get(scope, {})
            docs = [doc for s, doc in self._docs.values() if s == scope]
            statistics = ScopeStatistics(
                documents=len(docs),
                total_length=sum(doc.length for doc in docs),
                document_frequency={t: len(postings.get(t, {})) for t in request.terms},
            )
            frequencies: dict[str, dict[int, int]] = {}
            for term in request.terms:
                for memory_id, tf in postings.get(term, {}).items():
                    frequencies.setdefault(memory_id, {})[term] = tf
            candidates = []
            for memory_id in sorted(frequencies):
                item = self._items[(request.tenant_id, memory_id)]
                if not admits(
                    item,
                    tenant_id=request.tenant_id,
                    agent_id=request.agent_id,
                    purpose=request.purpose,
                    now=request.now,
                    subject_id=request.subject_id,
                    kinds=request.kinds,
                ):
                    continue
                _, doc = self._docs[item.key]
                candidates.append(
                    Candidate(
                        memory_id=memory_id,
                        term_frequencies=frequencies[memory_id],
                        length=doc.length,
                        confidence=item.confidence,
                        updated_at=item.updated_at,
                        tokens=item.tokens,
                    )
                )
            return SearchMatches(statistics, candidates)

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

    def rebuild(self, tenant_id: str, changes: Sequence[ItemChange], through: int) -> None:
        with self._lock:
            last = max(
                (e.position for e in self._events if e.event.tenant_id == tenant_id), default=0
            )
            if last != through:
                raise LogMoved(f"tenant {tenant_id!r} has events after position {through}")
            for key in [k for k in self._items if k[0] == tenant_id]:
                self._reindex(self._items.pop(key), None)
            for change in changes:
                self._items[change.item.key] = change.item
                self._reindex(change.item, change.index)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        with self._lock:  # writers wait: every read inside sees one state
            yield

    def subject_keys(self, limit: int | None = None) -> Iterator[SubjectKey]:
        with self._lock:
            return iter(list(self._keys.values())[:limit])

    def add_api_key(self, key: ApiKey) -> None:
        with self._lock:
            if key.key_id in self._api_keys:
                raise ValueError("duplicate API key id")
            self._api_keys[key.key_id] = key

    def api_key(self, key_id: str, *, wait: bool = True) -> ApiKey | None:
        if not self._lock.acquire(blocking=wait):
            raise ReadWouldWait("a writer holds the store")
        try:
            return self._api_keys.get(key_id)
        finally:
            self._lock.release()

    def api_keys(self, tenant_id: str | None = None) -> list[ApiKey]:
        with self._lock:
            keys = [k for k in self._api_keys.values() if tenant_id in (None, k.tenant_id)]
            return sorted(keys, key=lambda k: (k.tenant_id, k.created_at, k.key_id))

    def revoke_api_key(self, key_id: str, at: datetime) -> bool:
        with self._lock:
            key = self._api_keys.get(key_id)
            if key is None:
                return False
            if key.revoked_at is None:
                self._api_keys[key_id] = dataclasses.replace(key, revoked_at=at)
            return True

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        with self._lock:
            key = self._api_keys.get(key_id)
            if key is not None and (key.last_used_at is None or key.last_used_at < at):
                self._api_keys[key_id] = dataclasses.replace(key, last_used_at=at)

    def meta(self, name: str) -> str | None:
        with self._lock:
            return self._meta.get(name)

    def claim_meta(self, name: str, value: str) -> str:
        with self._lock:
            return self._meta.setdefault(name, value)

    def replace_meta(self, name: str, value: str) -> None:
        with self._lock:
            self._meta[name] = value

    def schema_version(self) -> int:
        return 0  # nothing to migrate: the store lives and dies with the process

    def ping(self) -> None:
        return None

    def close(self) -> None:
        return None
