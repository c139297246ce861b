"""The records that cross the storage ports: plain frozen values, no behaviour of note.

A store commits a :class:`Batch` atomically: events, projection rows, search postings, the
idempotency record and key changes all land in one transaction, or none do. Because a
batch carries everything it needs, a store may commit several batches of concurrent
callers in one transaction (group commit), each acknowledged only after that transaction
commits. Events (:class:`~governed_memory.core.events.StoredEvent`) and ranking inputs
(:class:`~governed_memory.core.retrieval.Candidate`) are core values and live in the core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from governed_memory.core.events import Event
from governed_memory.core.frozen import quick_init
from governed_memory.core.model import ItemState, Principal
from governed_memory.core.retrieval import Candidate, ScopeStatistics
from governed_memory.core.values import Kind, Scope, Status, Trust


@quick_init
@dataclass(frozen=True, slots=True)
class SubjectKey:
    """A subject's data key as stored: wrapped under the master key."""

    tenant_id: str
    subject_id: str
    key_id: bytes
    wrapped: bytes


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One stored event as the hash chain sees it (see :mod:`governed_memory.chain`).

    ``columns`` are the event's stored columns in ``codec.EVENT_COLUMNS`` order, exactly
    as read (the payload text as written); ``prev_hash`` and ``hash`` are the chain's
    values stored beside them, ``None`` only in a row written outside the store.
    """

    position: int
    tenant_id: str
    columns: tuple[Any, ...]
    prev_hash: bytes | None
    hash: bytes | None


@quick_init
@dataclass(frozen=True, slots=True)
class ItemKey:
    """One item's own data key as stored: wrapped under its subject's key.

    Every version of the item is sealed with it; deleting the row (erase, retention)
    destroys the item's content alone, and forgetting the subject destroys it with the key
    that wraps it.
    """

    tenant_id: str
    memory_id: str
    subject_id: str
    key_id: bytes
    wrapped: bytes


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored API key: whose it is, what it may do, until when; never the secret itself.

    ``principal_id`` names the person or service account the key belongs to: four eyes
    compare it, and events name it. Keys made before principals existed belong to
    ``key:<key id>``, the name their events already carry. ``last_used_at`` is coarse: each
    instance records a key's use at most once a minute (see ``http.auth``).
    """

    key_id: str
    tenant_id: str
    principal_id: str
    agents: frozenset[str] | None
    scopes: frozenset[Scope]
    max_trust: Trust
    secret_hash: str
    created_at: datetime
    name: str | None = None
    revoked_at: datetime | None = None
    expires_at: datetime | None = None
    last_used_at: datetime | None = None

    @property
    def credential_id(self) -> str:
        """The name of the key as a credential, which idempotency records belong to."""
        return credential_of(self.key_id)

    def expired(self, now: datetime) -> bool:
        """Whether the key has passed its expiry at ``now``."""
        return self.expires_at is not None and now >= self.expires_at

    def state(self, now: datetime) -> str:
        """``revoked``, ``expired`` or ``active`` at ``now``."""
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expired(now) else "active"

    def principal(self) -> Principal:
        """The principal this key authenticates, acting with this key as its credential."""
        return Principal(
            tenant_id=self.tenant_id,
            principal_id=self.principal_id,
            scopes=self.scopes,
            max_trust=self.max_trust,
            agents=self.agents,
            credential_id=self.credential_id,
        )


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """A signed-in session of the review console, as stored: the SHA-256 of the id its
    cookie carries (never the id), its key, ``key_check`` (a hash of the key's stored secret
    hash at sign-in, so a replaced secret ends the session; never the secret), and when it
    started and was last seen (coarsely: see ``http.console.sessions``)."""

    digest: str
    key_id: str
    key_check: str
    started_at: datetime
    last_seen: datetime


#: The store-meta name under which the search index's signature is recorded: how its
#: terms (and vectors) were made (``service.indexing.SearchSettings.signature``).
SEARCH_INDEX = "search_index"
#: What is recorded, before the signature, while ``gmem reindex`` rebuilds the index.
REBUILDING = "rebuilding:"


def serves_index(recorded: str | None, signature: str | None) -> bool:
    """Whether a request made for the index of ``signature`` may read or write a store
    that records ``recorded``: the same index, or one being rebuilt for it. A store that
    records none predates the record (the composition root refuses such a store at start),
    and a request without a signature makes no terms."""
    return recorded is None or signature is None or recorded in (signature, REBUILDING + signature)


def credential_of(key_id: str) -> str:
    """``key:<key id>``: an API key's name as a credential, and the principal of keys made
    before principals existed (what their events name as actor)."""
    return f"key:{key_id}"


@quick_init
@dataclass(frozen=True, slots=True)
class IndexDoc:
    """The search postings of one searchable item: hashed term → frequency, and length;
    with semantic recall on, also its vector, sealed like its content."""

    terms: Mapping[int, int]
    length: int
    vector: bytes | None = None


@dataclass(frozen=True, slots=True)
class IndexedContent:
    """What the index holds of an active item: the content version and hash its entry
    was made of, and the entry (terms with frequencies, length; no vector)."""

    content_version: int
    content_hash: str
    entry: IndexDoc


@dataclass(slots=True)
class SearchRows:
    """What the search index holds of one item, as ``gmem replay --verify`` compares it
    with the item's content: the (agent, purpose) scopes its rows are under, the
    frequency of each term in its postings, its document row's length and terms with their
    frequencies (``None``: no document row, or one whose terms cannot be read), and
    whether it has a vector."""

    scopes: set[tuple[str, str]] = field(default_factory=set)
    postings: dict[int, int] = field(default_factory=dict)
    length: int | None = None
    terms: dict[int, int] | None = None
    vector: bool = False


@dataclass(frozen=True, slots=True)
class SealedVector:
    """An eligible item's sealed vector, with what ranking needs to know about the item."""

    tenant_id: str
    memory_id: str
    subject_id: str
    version: int  # the content version the vector embeds (it is sealed for it)
    blob: bytes
    confidence: float
    updated_at: datetime
    tokens: int


@dataclass(frozen=True, slots=True)
class ItemChange:
    """A projection row to write if the row is still at ``expected_version`` (0: absent).

    ``index`` is the item's postings when it is searchable, ``None`` to remove them.
    """

    item: ItemState
    expected_version: int
    index: IndexDoc | None = None


@dataclass(frozen=True, slots=True)
class TenantRebuild:
    """A tenant's projection rows (``changes``, each expected absent) as the fold of its
    log up to position ``through`` leaves them; a rebuild swaps them in (``Store.rebuild``)."""

    tenant_id: str
    changes: Sequence[ItemChange]
    through: int


@dataclass(frozen=True, slots=True)
class Intact:
    """A tenant a store found intact for a rebuild: in one snapshot, the fold of its log up
    to position ``through`` (``events`` events, ``items`` items of which ``active`` are
    searchable), with the index entries its documents hold, made exactly the rows it held."""

    through: int
    events: int
    items: int
    active: int


class IntactCheck(Protocol):
    """The tenants a store checked before a rebuild and found intact (``Store.check_intact``).

    They are taken as rebuilt only if :meth:`accept` still finds them so: it returns those
    whose rows no write can have changed since they were checked (the others are rebuilt
    as any tenant), and from then on the store's ordinary writes keep them."""

    @property
    def tenants(self) -> Mapping[str, Intact]: ...

    def accept(self) -> set[str]: ...


@dataclass(frozen=True)
class NothingIntact:
    """A store that does not check tenants ahead of a rebuild: every tenant is folded."""

    tenants: Mapping[str, Intact] = field(default_factory=dict)

    def accept(self) -> set[str]:
        return set()


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """The first outcome of a request made with an idempotency key, by one credential."""

    tenant_id: str
    # The credential that made the request (``Principal.credential``): records are kept
    # per (tenant, credential, key), so another key's use of the same key string neither
    # replays nor blocks nor reveals it.
    credential: str
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
    # A subject whose key is destroyed, and with it every item key it wraps; the store
    # refuses the batch (SubjectChanged) if any item of that subject would be left undeleted.
    destroy_key: str | None = None
    # The signature of the index the batch's postings were made for: the store refuses the
    # batch (StoreUnavailable.index_rebuilt) unless the recorded one serves it (serves_index).
    index_signature: str | None = None
    # The key of an item the batch creates, stored with it.
    new_item_key: ItemKey | None = None
    # An item whose own key is destroyed (erase, retention): its content is gone for good.
    destroy_item_key: str | None = None

    @property
    def destroys_keys(self) -> bool:
        """Whether committing the batch destroys a key (SQLite then checkpoints its WAL)."""
        return self.destroy_key is not None or self.destroy_item_key is not None


@dataclass(frozen=True, slots=True)
class BrowseRequest:
    """A page of a tenant's items without a query (``GET /v1/memories``), every filter in
    the store's query, in (``updated_at``, id) order after the cursor ``after``.

    ``agents`` are those the credential may act for (``None``: all of the tenant's);
    ``status`` is matched as of ``now``: a live item past its expiry counts as expired.
    """

    tenant_id: str
    agents: frozenset[str] | None
    now: datetime
    limit: int
    agent_id: str | None = None
    purpose: str | None = None
    subject_id: str | None = None
    status: Status | None = None
    kind: Kind | None = None
    after: tuple[int, str] | None = None
    #: Newest first: (``updated_at``, id) descending, after the cursor in that order.
    newest_first: bool = False


#: Where a retention sweep stands: the (updated_at µs, tenant, id) of the last item it saw.
RetentionCursor = tuple[int, str, str]


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
    # The signature of the index the terms were made for: the store raises
    # StoreUnavailable.index_rebuilt unless the recorded one serves it (serves_index).
    index_signature: str | None = None
    # Also read the candidates' rows and keys, with the matches (SearchMatches.found), if
    # the store can (Items.reads_rows_with_matches).
    rows: bool = False


@dataclass(frozen=True, slots=True)
class SearchFound:
    """The rows of a search's candidates and the keys that open them, read in the same
    state as the matches: ``None`` where a subject or an item has no key (never made, or
    destroyed)."""

    items: Mapping[str, ItemState]  # by memory id
    subject_keys: Mapping[str, SubjectKey | None]  # by subject id, each item's subject
    item_keys: Mapping[str, ItemKey | None]  # by memory id, each item


@dataclass(frozen=True, slots=True)
class SearchMatches:
    """The survivors of the hard filters that match a query term, and scope statistics.

    ``complete`` is False when the store pruned matches that cannot rank in the top
    ``want``; the caller asks again with a larger ``want`` if it needs to walk further.
    ``found`` holds the candidates' rows and keys when the request asked for them and
    the store reads them with the matches.
    """

    statistics: ScopeStatistics
    candidates: Sequence[Candidate] = field(default_factory=list)
    complete: bool = True
    found: SearchFound | None = None


__all__ = [
    "REBUILDING",
    "SEARCH_INDEX",
    "ApiKey",
    "Batch",
    "BrowseRequest",
    "ChainLink",
    "ConsoleSession",
    "IdempotencyRecord",
    "IndexDoc",
    "IndexedContent",
    "ItemChange",
    "ItemKey",
    "RetentionCursor",
    "SealedVector",
    "SearchFound",
    "SearchMatches",
    "SearchRequest",
    "SearchRows",
    "SubjectKey",
    "TenantRebuild",
    "credential_of",
    "serves_index",
]
