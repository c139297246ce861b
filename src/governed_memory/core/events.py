"""One event type per change (SPEC §4). Events carry sealed content only.

Every event names its tenant, the memory it changed (``None`` for a subject-wide event),
the item version it produced, when it happened, who did it and the idempotency key of the
request that caused it. The store adds the global position when it commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, TypedDict

from governed_memory.core.frozen import quick_init
from governed_memory.core.values import Kind, Provenance, Status, Trust

SCHEMA_VERSION = 1


@quick_init
@dataclass(frozen=True, slots=True)
class ItemEvent:
    """What every single-item event carries, in this order: its id, the tenant, the item it
    changed, the item version it produced, when, who, and the idempotency key of the request
    that caused it. The concrete events below add their own fields after these."""

    event_id: str
    tenant_id: str
    memory_id: str
    version: int
    occurred_at: datetime
    actor: str
    idempotency_key: str | None


class EventHeader(TypedDict):
    """The fields of :class:`ItemEvent` as keyword arguments, for building any item event."""

    event_id: str
    tenant_id: str
    memory_id: str
    version: int
    occurred_at: datetime
    actor: str
    idempotency_key: str | None


@quick_init
@dataclass(frozen=True, slots=True)
class MemoryWritten(ItemEvent):
    """An item was created or rewritten (same id, expected version)."""

    agent_id: str
    subject_id: str
    purpose: str
    kind: Kind
    content: bytes
    content_hash: str
    provenance: Provenance
    trust: Trust
    confidence: float
    expires_at: datetime
    supersedes_id: str | None
    status: Status
    tokens: int

    type: ClassVar[str] = "memory.written"


@quick_init
@dataclass(frozen=True, slots=True)
class MemoryPromoted(ItemEvent):
    """A reviewer promoted a quarantined item: it becomes active and verified."""

    type: ClassVar[str] = "memory.promoted"


@quick_init
@dataclass(frozen=True, slots=True)
class MemoryRejected(ItemEvent):
    """A reviewer rejected a quarantined item; the reason is sealed like content."""

    reason: bytes | None

    type: ClassVar[str] = "memory.rejected"


@quick_init
@dataclass(frozen=True, slots=True)
class MemorySuperseded(ItemEvent):
    """A correction took effect: the old item is superseded by ``superseded_by``."""

    superseded_by: str

    type: ClassVar[str] = "memory.superseded"


@quick_init
@dataclass(frozen=True, slots=True)
class MemoryExpired(ItemEvent):
    """The item's time-to-live ran out."""

    type: ClassVar[str] = "memory.expired"


@quick_init
@dataclass(frozen=True, slots=True)
class MemoryErased(ItemEvent):
    """One item was erased on request: it is deleted, and the content of every version is
    destroyed with the item's own key. The event itself carries no content."""

    type: ClassVar[str] = "memory.erased"


#: Why content was destroyed without the item being erased: the only cause so far.
RETENTION = "retention"


@quick_init
@dataclass(frozen=True, slots=True)
class MemoryContentDestroyed(ItemEvent):
    """A retention window ran out: the content of every version of an expired, rejected or
    superseded item is destroyed with the item's key; the item keeps its status."""

    cause: str = RETENTION

    type: ClassVar[str] = "memory.content_destroyed"


@quick_init
@dataclass(frozen=True, slots=True)
class SubjectForgotten:
    """Every item of the subject is deleted and the subject's key destroyed."""

    event_id: str
    tenant_id: str
    memory_id: None
    version: None
    occurred_at: datetime
    actor: str
    idempotency_key: str | None
    subject_id: str

    type: ClassVar[str] = "subject.forgotten"


Event = (
    MemoryWritten
    | MemoryPromoted
    | MemoryRejected
    | MemorySuperseded
    | MemoryExpired
    | MemoryErased
    | MemoryContentDestroyed
    | SubjectForgotten
)

EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        MemoryWritten,
        MemoryPromoted,
        MemoryRejected,
        MemorySuperseded,
        MemoryExpired,
        MemoryErased,
        MemoryContentDestroyed,
        SubjectForgotten,
    )
}


@quick_init
@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as committed: its global position in the log and the event itself."""

    position: int
    event: Event
