"""The item as the projection keeps it, the item as callers see it, and the principal.

``ItemState`` is what the log folds into: its content is the sealed (encrypted) blob and
nothing else. ``MemoryItem`` is the public shape of SPEC §3, with plaintext content, built
by the service only after it has decrypted the blob with the subject's key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from governed_memory.core.frozen import quick_init
from governed_memory.core.values import (
    TRUST_RANK,
    Kind,
    Provenance,
    Scope,
    Status,
    Trust,
    from_rfc3339,
    rfc3339,
)

SEARCHABLE = Status.ACTIVE
LIVE_STATUSES = frozenset({Status.QUARANTINED, Status.ACTIVE})
#: The statuses whose content a retention window destroys (SPEC §7): the item is kept as a
#: record of what happened, its content only as long as the window allows.
RETAINED_STATUSES = frozenset({Status.EXPIRED, Status.REJECTED, Status.SUPERSEDED})


@dataclass(frozen=True, slots=True)
class Principal:
    """Who acts: one tenant, the agents it may act for, its scopes and its trust ceiling.

    ``principal_id`` names the person or service account: events name it as their actor,
    and four eyes compare it. ``credential_id`` names the credential it acts with
    (``key:<key id>`` for an API key); idempotency records belong to the credential. A
    library caller without a credential is its own: see :attr:`credential`.
    ``agents`` is ``None`` when the credential may act for every agent of its tenant.
    ``admin``, which older keys may carry, grants nothing (new keys cannot have it).
    """

    tenant_id: str
    principal_id: str
    scopes: frozenset[Scope]
    max_trust: Trust = Trust.UNTRUSTED
    agents: frozenset[str] | None = None
    credential_id: str | None = None

    @property
    def credential(self) -> str:
        """The credential this principal acts with: its key, or else the principal itself."""
        return self.principal_id if self.credential_id is None else self.credential_id

    def has(self, scope: Scope) -> bool:
        """Whether the credential carries ``scope``."""
        return scope in self.scopes

    def may_act_for(self, agent: str) -> bool:
        """Whether the credential may act for ``agent``."""
        return self.agents is None or agent in self.agents

    def may_claim(self, trust: Trust) -> bool:
        """Whether a write by this principal may claim ``trust``."""
        return TRUST_RANK[trust] <= TRUST_RANK[self.max_trust]


@quick_init
@dataclass(frozen=True, slots=True)
class ItemState:
    """One memory as the projection stores it (content sealed, never plaintext)."""

    tenant_id: str
    id: str
    agent_id: str
    subject_id: str
    purpose: str
    kind: Kind
    content: bytes | None
    content_version: int
    content_hash: str
    provenance: Provenance
    trust: Trust
    confidence: float
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    version: int
    status: Status
    supersedes_id: str | None
    superseded_by: str | None
    written_by: str
    tokens: int

    @property
    def key(self) -> tuple[str, str]:
        """The item's identity: unique per tenant."""
        return (self.tenant_id, self.id)


def effective_status(item: ItemState, now: datetime) -> Status:
    """The item's status at ``now``: a live item past its expiry is expired already,
    whether or not the expiry worker has recorded it yet."""
    if item.status in LIVE_STATUSES and item.expires_at <= now:
        return Status.EXPIRED
    return item.status


@quick_init
@dataclass(frozen=True, slots=True)
class MemoryItem:
    """A memory as callers see it: plaintext content, ``None`` once deleted."""

    id: str
    tenant_id: str
    agent_id: str
    subject_id: str
    purpose: str
    kind: Kind
    content: str | None
    content_hash: str
    provenance: Provenance
    trust: Trust
    confidence: float
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    version: int
    status: Status
    supersedes_id: str | None
    superseded_by: str | None

    @classmethod
    def from_state(
        cls, state: ItemState, content: str | None, now: datetime | None = None
    ) -> MemoryItem:
        """The public view of ``state`` with its decrypted ``content``; given ``now``, its
        status is the one it has at that moment (``expired`` once ``expires_at`` passed)."""
        return cls(
            id=state.id,
            tenant_id=state.tenant_id,
            agent_id=state.agent_id,
            subject_id=state.subject_id,
            purpose=state.purpose,
            kind=state.kind,
            content=content,
            content_hash=state.content_hash,
            provenance=state.provenance,
            trust=state.trust,
            confidence=state.confidence,
            created_at=state.created_at,
            updated_at=state.updated_at,
            expires_at=state.expires_at,
            version=state.version,
            status=state.status if now is None else effective_status(state, now),
            supersedes_id=state.supersedes_id,
            superseded_by=state.superseded_by,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form used by the HTTP API, the CLI and exports of results."""
        return {
            "id": self.id,
            "tenant_id": self.tenant_id,
            "agent_id": self.agent_id,
            "subject_id": self.subject_id,
            "purpose": self.purpose,
            "kind": self.kind.value,
            "content": self.content,
            "content_hash": self.content_hash,
            "provenance": self.provenance.as_dict(),
            "trust": self.trust.value,
            "confidence": self.confidence,
            "created_at": rfc3339(self.created_at),
            "updated_at": rfc3339(self.updated_at),
            "expires_at": rfc3339(self.expires_at),
            "version": self.version,
            "status": self.status.value,
            "supersedes_id": self.supersedes_id,
            "superseded_by": self.superseded_by,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryItem:
        """The item :meth:`to_dict` wrote; members it did not write (a score) are ignored.

        It reads the service's answers, so it checks shapes, not the rules of SPEC §13:
        ``KeyError``, ``TypeError`` or ``ValueError`` when ``data`` is not an item.
        """
        provenance = data["provenance"]
        return cls(
            id=str(data["id"]),
            tenant_id=str(data["tenant_id"]),
            agent_id=str(data["agent_id"]),
            subject_id=str(data["subject_id"]),
            purpose=str(data["purpose"]),
            kind=Kind(data["kind"]),
            content=data["content"],
            content_hash=str(data["content_hash"]),
            provenance=Provenance(
                source=str(provenance["source"]),
                ref=str(provenance["ref"]),
                version=provenance.get("version"),
            ),
            trust=Trust(data["trust"]),
            confidence=float(data["confidence"]),
            created_at=from_rfc3339(data["created_at"]),
            updated_at=from_rfc3339(data["updated_at"]),
            expires_at=from_rfc3339(data["expires_at"]),
            version=int(data["version"]),
            status=Status(data["status"]),
            supersedes_id=data.get("supersedes_id"),
            superseded_by=data.get("superseded_by"),
        )
