"""The ports the service needs: a store, a clock and a tokenizer.

Records crossing the store port are plain frozen dataclasses. A store commits a
:class:`Batch` atomically: events, projection rows, search postings, the idempotency record
and key changes all land in one transaction, or none do. Because a batch carries everything
it needs, a store may commit several batches of concurrent callers in one transaction
(group commit), each acknowledged only after that transaction commits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from governed_memory.apikeys import ApiKey
from governed_memory.core.events import Event, StoredEvent
from governed_memory.core.model import ItemState
from governed_memory.core.retrieval import Candidate, ScopeStatistics
from governed_memory.core.values import Kind
from governed_memory.crypto import SubjectKey
from governed_memory.errors import GovernedMemoryError
from governed_memory.tokens import Tokenizer


@dataclass(frozen=True, slots=True)
class IndexDoc:
    """The search postings of one searchable item: hashed term → frequency, and length."""

    terms: Mapping[int, int]
    length: int


@dataclass(frozen=True, slots=True)
class ItemChange:
    """A projection row to write if the row is still at ``expected_version`` (0: absent).

    ``index`` is the item's postings when it is searchable, ``None`` to remove them.
    """

    item: ItemState
    expected_version: int
    index: IndexDoc | None = None


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """The first outcome of a request made with an idempotency key."""

    tenant_id: str
    key: str
    fingerprint: str
    result: Mapping[str, Any]
    position: int | None = None


@dataclass(frozen=True, slots=True)
class Batch:
    """Everything one command changes, committed atomically."""

    tenant_id: str
    events: Sequence[Event]
    changes: Sequence[ItemChange] = ()
    idempotency: IdempotencyRecord | None = None
    require_key: SubjectKey | None = None
    # A subject whose key is destroyed; the store refuses the batch (SubjectChanged) if
    # any item of that subject would be left undeleted.
    destroy_key: str | None = None


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """A scoped search with every hard filter, as the store must apply it in its query."""

    tenant_id: str
    agent_id: str
    purpose: str
    terms: Sequence[int]
    now: datetime
    subject_id: str | None = None
    kinds: frozenset[Kind] | None = None
    # How many of the best-ranked items the caller needs; None means every match. A store
    # may then return fewer candidates, provided they surely include the top ``want``.
    want: int | None = None


@dataclass(frozen=True, slots=True)
class SearchMatches:
    """The survivors of the hard filters that match a query term, and scope statistics.

    ``complete`` is False when the store pruned matches that cannot rank in the top
    ``want``; the caller asks again with a larger ``want`` if it needs to walk further.
    """

    statistics: ScopeStatistics
    candidates: Sequence[Candidate] = field(default_factory=list)
    complete: bool = True


class IdempotencyKeyTaken(GovernedMemoryError):
    """A concurrent request committed the same idempotency key first (store-internal)."""

    title = "Idempotency key taken"

    def __init__(self, record: IdempotencyRecord) -> None:
        super().__init__(f"idempotency key already recorded for tenant {record.tenant_id!r}")
        self.record = record


class SubjectKeyGone(GovernedMemoryError):
    """The subject key that sealed a write was destroyed before the write committed."""

    title = "Subject key destroyed"


class SubjectChanged(GovernedMemoryError):
    """A forget would leave an item of the subject undeleted (one was written meanwhile)."""

    title = "Subject changed"


class LogMoved(GovernedMemoryError):
    """Events were appended after a rebuild read the log: fold again (store-internal)."""

    title = "Log moved"


class ReadWouldWait(GovernedMemoryError):
    """A read asked not to wait could not be answered at once (see ``Store.api_key``)."""

    title = "Read would wait"


class Store(Protocol):
    """What the service needs from storage. One module per backend implements it."""

    def commit(self, batch: Batch) -> list[StoredEvent]:
        """Apply a batch atomically; raise ``VersionConflict``, ``IdempotencyKeyTaken`` or
        ``SubjectKeyGone`` and write nothing if a precondition fails."""
        ...

    def get(self, tenant_id: str, memory_id: str) -> ItemState | None: ...

    def get_many(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, ItemState]: ...

    def subject_items(self, tenant_id: str, subject_id: str) -> list[ItemState]: ...

    def subject_key(self, tenant_id: str, subject_id: str) -> SubjectKey | None: ...

    def subject_keys_for(self, tenant_id: str, subject_ids: Sequence[str]) -> dict[str, SubjectKey]:
        """The stored keys of those subjects that have one, by subject id (one read)."""
        ...

    def add_subject_key(self, key: SubjectKey) -> SubjectKey:
        """Store ``key`` unless the subject already has one; return the one that is stored."""
        ...

    def idempotency(self, tenant_id: str, key: str) -> IdempotencyRecord | None: ...

    def events_after(self, tenant_id: str | None, after: int, limit: int) -> list[StoredEvent]:
        """Committed events with a position above ``after``, in position order."""
        ...

    def memory_events(self, tenant_id: str, memory_id: str, subject_id: str) -> list[StoredEvent]:
        """The events of one item, and the forget events of its subject, in order."""
        ...

    def due_for_expiry(self, now: datetime, limit: int) -> list[ItemState]: ...

    def quarantine(
        self,
        tenant_id: str,
        agents: frozenset[str] | None,
        agent_id: str | None,
        purpose: str | None,
        limit: int,
        after: tuple[int, str] | None,
    ) -> list[ItemState]:
        """Quarantined items, oldest change first, after the (updated_at µs, id) cursor."""
        ...

    def search(self, request: SearchRequest) -> SearchMatches: ...

    def tenants(self) -> list[str]: ...

    def tenant_events(self, tenant_id: str) -> Iterator[StoredEvent]: ...

    def tenant_items(self, tenant_id: str) -> Iterator[ItemState]: ...

    def head(self) -> int:
        """The highest committed position (0 for an empty log)."""
        ...

    def import_events(self, events: Sequence[StoredEvent]) -> None:
        """Append events with their original positions (all above ``head()``), atomically."""
        ...

    def rebuild(self, tenant_id: str, changes: Sequence[ItemChange], through: int) -> None:
        """Replace the tenant's projection rows and postings with ``changes``, atomically,
        if the tenant's last event is still at position ``through`` (the log they were
        folded from); otherwise raise ``LogMoved`` and change nothing."""
        ...

    def snapshot(self) -> AbstractContextManager[None]:
        """While open, this thread's reads see one consistent state of the store (used by
        exports, so keys and events cannot straddle a concurrent forget, and by searches,
        so scores, rows and keys all come from one committed state)."""
        ...

    def subject_keys(self, limit: int | None = None) -> Iterator[SubjectKey]:
        """Stored (wrapped) subject keys, all of them unless ``limit`` says how many."""
        ...

    def add_api_key(self, key: ApiKey) -> None: ...

    def api_key(self, key_id: str, *, wait: bool = True) -> ApiKey | None:
        """The key's record. With ``wait=False`` a store raises :class:`ReadWouldWait`
        instead of waiting (on the network, a lock, a busy database): the HTTP edge asks
        that way on its event loop and, if refused, asks again from a worker thread."""
        ...

    def api_keys(self, tenant_id: str | None = None) -> list[ApiKey]: ...

    def revoke_api_key(self, key_id: str, at: datetime) -> bool:
        """Mark a key revoked; False if no such key (revoking twice keeps the first time)."""
        ...

    def ping(self) -> None:
        """Raise ``StoreUnavailable`` unless the store answers."""
        ...

    def close(self) -> None: ...


EVENT_PAGE = 5_000


def paged_events(
    events_after: Callable[[str | None, int, int], list[StoredEvent]], tenant_id: str
) -> Iterator[StoredEvent]:
    """Every event of a tenant in position order, read page by page (shared by stores)."""
    after = 0
    while True:
        page = events_after(tenant_id, after, EVENT_PAGE)
        yield from page
        if len(page) < EVENT_PAGE:
            return
        after = page[-1].position


class Clock(Protocol):
    """Where the service learns the time (the core never reads a clock)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


__all__ = [
    "Batch",
    "Clock",
    "IdempotencyKeyTaken",
    "IdempotencyRecord",
    "IndexDoc",
    "ItemChange",
    "LogMoved",
    "SearchMatches",
    "SearchRequest",
    "Store",
    "SubjectChanged",
    "SubjectKeyGone",
    "SystemClock",
    "Tokenizer",
    "paged_events",
]
