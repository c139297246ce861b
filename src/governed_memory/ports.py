"""The ports the service needs: small storage Protocols, a clock and a tokenizer.

Storage is role-sized ports, as eventsourcing's recorders are: the event log, the
projection's items, the subject keys, the items' own keys, the API keys and the review
console's sessions. A backend implements them all and :class:`Store` is their sum, plus
what every backend has (a snapshot, a ping, a close). A caller depends on the smallest
port it needs: the HTTP authenticator on :class:`ApiKeys` alone. The records crossing
these ports are in :mod:`governed_memory.records`; the store-internal errors they raise
are in :mod:`governed_memory.errors`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Protocol

from governed_memory.core.events import StoredEvent
from governed_memory.core.model import ItemState
from governed_memory.core.policy import RetentionKey
from governed_memory.records import (
    ApiKey,
    Batch,
    BrowseRequest,
    ChainLink,
    ConsoleSession,
    IdempotencyRecord,
    IndexedContent,
    IntactCheck,
    ItemKey,
    RetentionCursor,
    SealedVector,
    SearchMatches,
    SearchRequest,
    SearchRows,
    SubjectKey,
    TenantRebuild,
)
from governed_memory.tokens import Tokenizer


class EventLog(Protocol):
    """The append-only log: atomic batches in, events out in position order."""

    def commit(self, batch: Batch) -> list[StoredEvent]:
        """Apply a batch atomically; raise ``VersionConflict``, ``IdempotencyKeyTaken`` or
        ``SubjectKeyGone`` and write nothing if a precondition fails."""
        ...

    def idempotency(self, tenant_id: str, credential: str, key: str) -> IdempotencyRecord | None:
        """The record the credential made with this key in its tenant, if any."""
        ...

    def idempotency_records(
        self, after: tuple[str, str, str] | None, limit: int
    ) -> list[IdempotencyRecord]:
        """Up to ``limit`` stored records in (tenant, credential, key) order, after the one
        ``after`` names (from the first when None): what an export carries."""
        ...

    def import_idempotency(self, records: Sequence[IdempotencyRecord]) -> None:
        """Store imported records with their positions, atomically (an import into an
        empty store)."""
        ...

    def events_after(self, tenant_id: str | None, after: int, limit: int) -> list[StoredEvent]:
        """Committed events with a position above ``after``, in position order."""
        ...

    def events_before(self, tenant_id: str, before: int | None, limit: int) -> list[StoredEvent]:
        """The tenant's committed events with a position below ``before`` (from the newest
        when None), newest first."""
        ...

    def memory_events(self, tenant_id: str, memory_id: str, subject_id: str) -> list[StoredEvent]:
        """The events of one item, and the forget events of its subject, in order."""
        ...

    def tenants(self) -> list[str]: ...

    def tenant_events(self, tenant_id: str) -> Iterator[StoredEvent]: ...

    def head(self) -> int:
        """The highest committed position (0 for an empty log)."""
        ...

    def import_events(self, events: Sequence[StoredEvent]) -> None:
        """Append events with their original positions (all above ``head()``), atomically."""
        ...

    def chain_links(self, tenant_id: str | None, after: int, limit: int) -> list[ChainLink]:
        """Stored events above ``after`` with their chain hashes, as stored, in order."""
        ...


class Items(Protocol):
    """The projection: one row per item, its search postings, and the reads over them."""

    #: Whether :meth:`search` answers a request with ``rows`` set with the candidates'
    #: rows and keys (``SearchMatches.found``), read with the matches in one consistent
    #: read: a lexical search then needs no snapshot (on a server, one round trip). A
    #: store that says no is searched in a snapshot, and the rows read after ranking.
    reads_rows_with_matches: bool
    #: Whether those rows may leave candidates out (SQLite: every one of a search with
    #: many candidates, whose rows would cost more than reading the few chosen): the
    #: caller then searches in a :meth:`snapshot` and reads the rows of the hits left out
    #: in it. A store that says no returns the rows of every candidate.
    rows_with_matches_partial: bool

    def get(self, tenant_id: str, memory_id: str) -> ItemState | None: ...

    def write_state(
        self, tenant_id: str, subject_id: str, memory_id: str
    ) -> tuple[SubjectKey | None, ItemState | None]:
        """What a write decides on, read together (one round trip on a server): the
        subject's key (``subject_key``) and the item's current row (``get``)."""
        ...

    def get_many(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, ItemState]: ...

    def subject_items(self, tenant_id: str, subject_id: str) -> list[ItemState]: ...

    def due_for_expiry(self, now: datetime, limit: int) -> list[ItemState]: ...

    def due_for_retention(
        self, cutoffs: Mapping[RetentionKey, datetime], limit: int, after: RetentionCursor | None
    ) -> list[ItemState]:
        """Items that still hold content and entered their (kind, status) at or before its
        cutoff, in (updated_at, tenant, id) order after the cursor ``after``."""
        ...

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
        """Quarantined items, oldest change first, after the (updated_at µs, id) cursor;
        given ``now``, only those not yet past their expiry (still reviewable)."""
        ...

    def browse(self, request: BrowseRequest) -> list[ItemState]:
        """The items the request's filters admit, at most ``limit`` (see BrowseRequest)."""
        ...

    def search(self, request: SearchRequest) -> SearchMatches:
        """The matches of ``request`` in its scope, under every hard filter; raise
        ``StoreUnavailable.index_rebuilt()`` unless the recorded index serves its
        ``index_signature`` (:func:`~governed_memory.records.serves_index`). With
        ``request.rows``, a store that :attr:`reads_rows_with_matches` also returns the
        rows and keys of every candidate it returns, from the same state (a store whose
        :attr:`rows_with_matches_partial` may return those of none)."""
        ...

    def scope_vectors(self, request: SearchRequest) -> list[SealedVector]:
        """The sealed vectors of every item of the scope that passes the hard filters of
        ``request`` (its terms and ``want`` aside), filtered in the storage query. Read in
        the snapshot of a :meth:`search`, which has checked the index's signature."""
        ...

    def tenant_items(self, tenant_id: str) -> Iterator[ItemState]: ...

    def search_rows(self, tenant_id: str) -> dict[str, SearchRows]:
        """Every search row of the tenant (postings, documents, vectors), by the memory id
        of its item; a row whose item is not the tenant's, by ``#`` and its row id."""
        ...

    def index_entries(self, tenant_id: str) -> dict[str, IndexedContent]:
        """What the index holds of each of the tenant's active items, by memory id: the
        content it was made of (version and hash) and its terms with their frequencies
        and length (no vector), so a rebuild need not open content it indexed already."""
        ...

    def check_intact(self, tenants: Sequence[str]) -> IntactCheck:
        """Before a rebuild that keeps the index's entries: the tenants (of ``tenants``)
        whose rows already are the fold of their logs, found ahead by whatever means the
        store has (SQLite: worker processes); :meth:`IntactCheck.accept`, called right
        after, tells which of them no write can have changed since. A store may find
        none."""
        ...

    def rebuilding(self) -> AbstractContextManager[None]:
        """Around a whole rebuild: a store may relax the durability of each swap (a rebuild
        interrupted by a crash is done again) provided the result is durable when the
        block ends and the store stays consistent throughout."""
        ...

    def rebuild(self, tenants: Sequence[TenantRebuild]) -> set[str]:
        """Make each tenant's projection rows and postings exactly its ``changes``, all in
        one transaction, except the tenants whose last event is no longer at ``through``
        (the log they were folded from): those are left unchanged, and returned. A store
        may compare and write only the rows that differ (an intact projection then costs
        its reads); any row that differs, is missing or should not exist is rewritten."""
        ...


class SubjectKeys(Protocol):
    """The wrapped data key of each (tenant, subject); deleting one is crypto-shredding."""

    def subject_key(self, tenant_id: str, subject_id: str) -> SubjectKey | None: ...

    def subject_keys_for(self, tenant_id: str, subject_ids: Sequence[str]) -> dict[str, SubjectKey]:
        """The stored keys of those subjects that have one, by subject id (one read)."""
        ...

    def add_subject_key(self, key: SubjectKey) -> SubjectKey:
        """Store ``key`` unless the subject already has one; return the one that is stored."""
        ...

    def subject_keys(self, limit: int | None = None) -> Iterator[SubjectKey]:
        """Stored (wrapped) subject keys, all of them unless ``limit`` says how many."""
        ...


class ItemKeys(Protocol):
    """Each item's own wrapped data key. A batch adds one (``new_item_key``) or destroys one
    (``destroy_item_key``); forgetting a subject destroys all of the subject's."""

    def item_key(self, tenant_id: str, memory_id: str) -> ItemKey | None: ...

    def item_keys_for(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, ItemKey]:
        """The stored keys of those items that have one, by memory id (one read)."""
        ...

    def item_keys(self, limit: int | None = None) -> Iterator[ItemKey]:
        """Stored (wrapped) item keys in (tenant, memory id) order, all unless ``limit``."""
        ...

    def import_item_keys(self, keys: Sequence[ItemKey]) -> None:
        """Store imported item keys, atomically (an import into an empty store)."""
        ...


class ApiKeys(Protocol):
    """API key records (hashed secrets): what the HTTP edge and ``gmem keys`` need."""

    def add_api_key(self, key: ApiKey) -> None: ...

    def api_key(self, key_id: str, *, wait: bool = True) -> ApiKey | None:
        """The key's record. With ``wait=False`` a store raises ``ReadWouldWait``
        instead of waiting (on the network, a lock, a busy database): the HTTP edge asks
        that way on its event loop and, if refused, asks again from a worker thread."""
        ...

    def api_keys(self, tenant_id: str | None = None) -> list[ApiKey]: ...

    def revoke_api_key(self, key_id: str, at: datetime) -> bool:
        """Mark a key revoked; False if no such key (revoking twice keeps the first time)."""
        ...

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        """Record that the key was used at ``at``, unless a later use is recorded already."""
        ...


class ConsoleSessions(Protocol):
    """The review console's sessions, by the SHA-256 of their cookie's id: kept in the store,
    so every worker and every instance on the database sees a sign-in and a sign-out."""

    def add_console_session(self, session: ConsoleSession) -> None: ...

    def console_session(self, digest: str) -> ConsoleSession | None: ...

    def touch_console_session(self, digest: str, at: datetime) -> None:
        """Record that the session was seen at ``at``, unless a later time is recorded."""
        ...

    def end_console_session(self, digest: str) -> None:
        """Delete the session (an unknown digest is nothing to do)."""
        ...

    def end_idle_console_sessions(self, seen_before: datetime) -> int:
        """Delete every session last seen before ``seen_before``; how many were."""
        ...


class Credentials(ApiKeys, ConsoleSessions, Protocol):
    """What the HTTP edge reads and writes of the store: API keys and console sessions."""


class StoreMeta(Protocol):
    """Facts about the store itself, by name (a master-key check value, the analyzer of the
    search index): small text values, never content."""

    def meta(self, name: str) -> str | None: ...

    def claim_meta(self, name: str, value: str) -> str:
        """Store ``value`` under ``name`` unless a value is stored; return the stored one.
        The first writer wins, across every instance on the database."""
        ...

    def replace_meta(self, name: str, value: str) -> None: ...


class Store(EventLog, Items, SubjectKeys, ItemKeys, ApiKeys, ConsoleSessions, StoreMeta, Protocol):
    """Every port of one backend, and what a whole store has besides."""

    #: Whether :meth:`prompt` can answer a search (SQLite: reads of a local file); a
    #: store whose every read may wait (over a network, for a lock) says no, and its
    #: ``prompt`` refuses at once.
    prompt_searches: bool

    def snapshot(self) -> AbstractContextManager[None]:
        """While open, this thread's reads see one consistent state of the store (used by
        exports, so keys and events cannot straddle a concurrent forget, and by searches,
        so scores, rows and keys all come from one committed state)."""
        ...

    def prompt(self) -> AbstractContextManager[None]:
        """While open, this thread's reads never wait (for a lock, a busy database, the
        network) and a search is made only if its scope is small enough to be searched at
        once: otherwise ``ReadWouldWait`` is raised, at the latest before the scope's
        postings are read, and the caller asks again outside (the HTTP edge searches so
        on its event loop, and from a worker thread when refused). A store that cannot
        read without waiting raises it on entering."""
        ...

    def schema_version(self) -> int:
        """The highest schema migration applied (0 for a store without migrations)."""
        ...

    def ping(self) -> None:
        """Raise ``StoreUnavailable`` unless the store answers."""
        ...

    def close(self) -> None: ...


def holds_log(store: Store) -> bool:
    """Whether ``store`` holds any event or subject key (what ``gmem import`` refuses to
    load into, and what makes a store another's to keep)."""
    return store.head() != 0 or next(store.subject_keys(limit=1), None) is not None


class Embedder(Protocol):
    """Text to vectors, for semantic recall (SPEC §6.2): a local model with a name (it is
    part of the search index's signature) and a fixed number of dimensions."""

    @property
    def name(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector of ``dimensions`` numbers per text, in order."""
        ...


class Clock(Protocol):
    """Where the service learns the time (the core never reads a clock)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


__all__ = [
    "ApiKeys",
    "Clock",
    "ConsoleSessions",
    "Credentials",
    "Embedder",
    "EventLog",
    "ItemKeys",
    "Items",
    "Store",
    "StoreMeta",
    "SubjectKeys",
    "SystemClock",
    "Tokenizer",
    "holds_log",
]
