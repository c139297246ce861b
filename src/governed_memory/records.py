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
from typing import Any

from governed_memory.core.events import Event
from governed_memory.core.model import ItemState, Principal
from governed_memory.core.retrieval import Candidate, ScopeStatistics
from governed_memory.core.values import Kind, Scope, Trust


@dataclass(frozen=True, slots=True)
class SubjectKey:
    """A subject's data key as stored: wrapped under the master key."""

    tenant_id: str
    subject_id: str
    key_id: bytes
    wrapped: bytes


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored API key: who it is for and what it may do; never the secret itself."""

    key_id: str
    tenant_id: str
    agents: frozenset[str] | None
    scopes: frozenset[Scope]
    max_trust: Trust
    secret_hash: str
    created_at: datetime
    name: str | None = None
    revoked_at: datetime | None = None

    @property
    def principal_id(self) -> str:
        return f"key:{self.key_id}"

    def principal(self) -> Principal:
        """The principal this key authenticates."""
        return Principal(
            tenant_id=self.tenant_id,
            principal_id=self.principal_id,
            scopes=self.scopes,
            max_trust=self.max_trust,
            agents=self.agents,
        )


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


@dataclass(frozen=True, slots=True)
class IndexDoc:
    """The search postings of one searchable item: hashed term → frequency, and length;
    with semantic recall on, also its vector, sealed like its content."""

    terms: Mapping[int, int]
    length: int
    vector: bytes | None = None


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
    # The signature of the index the batch's postings were made for: the store refuses the
    # batch (StoreUnavailable.index_rebuilt) unless the recorded one serves it (serves_index).
    index_signature: str | None = None


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


@dataclass(frozen=True, slots=True)
class SearchMatches:
    """The survivors of the hard filters that match a query term, and scope statistics.

    ``complete`` is False when the store pruned matches that cannot rank in the top
    ``want``; the caller asks again with a larger ``want`` if it needs to walk further.
    """

    statistics: ScopeStatistics
    candidates: Sequence[Candidate] = field(default_factory=list)
    complete: bool = True


__all__ = [
    "REBUILDING",
    "SEARCH_INDEX",
    "ApiKey",
    "Batch",
    "IdempotencyRecord",
    "IndexDoc",
    "ItemChange",
    "SealedVector",
    "SearchMatches",
    "SearchRequest",
    "SubjectKey",
    "serves_index",
]
