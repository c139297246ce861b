"""One event type per change (SPEC §4). Events carry sealed content only.

Every event names its tenant, the memory it changed (``None`` for a subject-wide event),
the item version it produced, when it happened, who did it and the idempotency key of the
request that caused it. The store adds the global position when it commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from governed_memory.core.values import Kind, Provenance, Status, Trust

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class MemoryWritten:
    """An item was created or rewritten (same id, expected version)."""

    event_id: str
    tenant_id: str
    memory_id: str
    version: int
    occurred_at: datetime
    actor: str
    idempotency_key: str | None
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


@dataclass(frozen=True, slots=True)
class MemoryPromoted:
    """A reviewer promoted a quarantined item: it becomes active and verified."""

    event_id: str
    tenant_id: str
    memory_id: str
    version: int
    occurred_at: datetime
    actor: str
    idempotency_key: str | None

    type: ClassVar[str] = "memory.promoted"


@dataclass(frozen=True, slots=True)
class MemoryRejected:
    """A reviewer rejected a quarantined item; the reason is sealed like content."""

    event_id: str
    tenant_id: str
    memory_id: str
    version: int
    occurred_at: datetime
    actor: str
    idempotency_key: str | None
    reason: bytes | None

    type: ClassVar[str] = "memory.rejected"


@dataclass(frozen=True, slots=True)
class MemorySuperseded:
    """A correction took effect: the old item is superseded by ``superseded_by``."""

    event_id: str
    tenant_id: str
    memory_id: str
    version: int
    occurred_at: datetime
    actor: str
    idempotency_key: str | None
    superseded_by: str

    type: ClassVar[str] = "memory.superseded"


@dataclass(frozen=True, slots=True)
class MemoryExpired:
    """The item's time-to-live ran out."""

    event_id: str
    tenant_id: str
    memory_id: str
    version: int
    occurred_at: datetime
    actor: str
    idempotency_key: str | None

    type: ClassVar[str] = "memory.expired"


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
        SubjectForgotten,
    )
}


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as committed: its global position in the log and the event itself."""

    position: int
    event: Event
