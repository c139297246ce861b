"""``decide``: every rule of the status-transition table (SPEC §3), and nothing else.

Each function takes the current state (loaded by the service), a validated command and a
context carrying ``now``, the acting principal and an id source, and returns the events
the command produces, or raises a domain error. No IO, no clock, no randomness of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from governed_memory.core.access import (
    require_erase,
    require_forget,
    require_four_eyes,
    require_review,
    require_visible,
    require_write,
    visible,
)
from governed_memory.core.commands import (
    DestroyContent,
    EraseMemory,
    ExpireMemory,
    ForgetSubject,
    PromoteMemory,
    RejectMemory,
    WriteMemory,
)
from governed_memory.core.events import (
    Event,
    EventHeader,
    MemoryContentDestroyed,
    MemoryErased,
    MemoryExpired,
    MemoryPromoted,
    MemoryRejected,
    MemorySuperseded,
    MemoryWritten,
    SubjectForgotten,
)
from governed_memory.core.model import LIVE_STATUSES, ItemState, Principal, effective_status
from governed_memory.core.policy import RetentionPolicy, TtlPolicy, capped_confidence
from governed_memory.core.values import Status, Trust
from governed_memory.errors import (
    InvalidTransition,
    NotFound,
    PermissionDenied,
    ValidationError,
    VersionConflict,
)


@dataclass(frozen=True, slots=True)
class Context:
    """What a decision may know about the world: the time, who acts, and fresh ids."""

    now: datetime
    principal: Principal
    new_id: Callable[[], str]
    idempotency_key: str | None = None
    policy: TtlPolicy = field(default_factory=TtlPolicy)

    def header(self, tenant_id: str, memory_id: str, version: int) -> EventHeader:
        """The common fields of an event this decision makes: a fresh id, now, the actor
        and the request's idempotency key, for the item version it produces."""
        return EventHeader(
            event_id=self.new_id(),
            tenant_id=tenant_id,
            memory_id=memory_id,
            version=version,
            occurred_at=self.now,
            actor=self.principal.principal_id,
            idempotency_key=self.idempotency_key,
        )

    def next_of(self, item: ItemState) -> EventHeader:
        """The header of an event that moves ``item`` to its next version."""
        return self.header(item.tenant_id, item.id, item.version + 1)


@dataclass(frozen=True, slots=True)
class SealedContent:
    """Content already encrypted by the service for the version the write will produce."""

    blob: bytes
    content_hash: str
    tokens: int


#: The empty content slot of a write decided before its content is sealed.
UNSEALED = SealedContent(b"", "", 0)


def _check_version(memory_id: str, current: ItemState | None, expected: int) -> None:
    actual = 0 if current is None else current.version
    if actual != expected:
        raise VersionConflict(memory_id, expected, actual)


def _same_scope(a: ItemState, b: ItemState) -> bool:
    return (a.tenant_id, a.agent_id, a.purpose) == (b.tenant_id, b.agent_id, b.purpose)


def _supersede(
    ctx: Context,
    correction_id: str,
    correction: ItemState | None,
    target: ItemState | None,
) -> list[Event]:
    """The superseded event of a correction that is taking effect now, if it still applies.

    A correction supersedes only an active item of its own tenant, agent and purpose;
    if the target has left ``active`` meanwhile, the correction simply stands alone.
    """
    if target is None or effective_status(target, ctx.now) is not Status.ACTIVE:
        return []
    if correction is not None and not _same_scope(correction, target):
        return []
    return [MemorySuperseded(**ctx.next_of(target), superseded_by=correction_id)]


def decide_write(
    ctx: Context,
    command: WriteMemory,
    memory_id: str,
    sealed: SealedContent,
    current: ItemState | None,
    target: ItemState | None,
) -> list[Event]:
    """Create or rewrite an item; quarantine what is untrusted; apply a correction.

    The service may decide before it seals (``sealed`` is then :data:`UNSEALED`) and fill
    the content in afterwards with :func:`with_content`: the rules never look at it.
    """
    _check_write(ctx, command, memory_id, current, target)
    principal = ctx.principal
    status = Status.QUARANTINED if command.trust is Trust.UNTRUSTED else Status.ACTIVE
    supersedes_id = command.supersedes_id if current is None else current.supersedes_id
    written = MemoryWritten(
        **ctx.header(principal.tenant_id, memory_id, command.expected_version + 1),
        agent_id=command.agent_id,
        subject_id=command.subject_id,
        purpose=command.purpose,
        kind=command.kind,
        content=sealed.blob,
        content_hash=sealed.content_hash,
        provenance=command.provenance,
        trust=command.trust,
        confidence=capped_confidence(command.trust, command.confidence),
        expires_at=ctx.policy.expires_at(
            command.kind, ctx.now, command.expires_at, command.ttl_seconds
        ),
        supersedes_id=supersedes_id,
        status=status,
        tokens=sealed.tokens,
    )
    events: list[Event] = [written]
    # A quarantined correction supersedes nothing until it is promoted (SPEC §3).
    if status is Status.ACTIVE and supersedes_id is not None:
        events += _supersede(ctx, memory_id, current, target)
    return events


def _check_write(
    ctx: Context,
    command: WriteMemory,
    memory_id: str,
    current: ItemState | None,
    target: ItemState | None,
) -> None:
    require_write(ctx.principal, command)
    if current is not None and not visible(ctx.principal, current):
        if command.expected_version == 0:
            # Ids are unique per tenant, so the clash itself cannot be hidden; its
            # version and state can.
            raise InvalidTransition(f"memory id {memory_id!r} is already in use")
        raise NotFound(f"memory {memory_id!r} not found")
    _check_version(memory_id, current, command.expected_version)
    if current is not None:
        _check_rewrite(ctx, command, current)
    elif command.supersedes_id is not None:
        _check_correction_target(ctx, command, target)


def with_content(events: Sequence[Event], sealed: SealedContent) -> list[Event]:
    """A decided write's events, its written event now holding the sealed content."""
    written, *rest = events
    assert isinstance(written, MemoryWritten), "a write decides memory.written first"
    filled = dataclasses.replace(
        written, content=sealed.blob, content_hash=sealed.content_hash, tokens=sealed.tokens
    )
    return [filled, *rest]


def with_reason(events: Sequence[Event], sealed_reason: bytes) -> list[Event]:
    """A decided rejection, its event now holding the sealed reason."""
    (rejected,) = events
    assert isinstance(rejected, MemoryRejected), "a rejection decides memory.rejected"
    return [dataclasses.replace(rejected, reason=sealed_reason)]


def _check_rewrite(ctx: Context, command: WriteMemory, current: ItemState) -> None:
    status = effective_status(current, ctx.now)
    if status not in LIVE_STATUSES:
        raise InvalidTransition(
            f"memory {current.id!r} is {status.value} and cannot be rewritten",
            current.version,
        )
    if status is Status.ACTIVE and command.trust is Trust.UNTRUSTED:
        # An untrusted write must never knock an active memory out of retrieval: it
        # would replace the content and send the item back to quarantine. Such a
        # change is proposed as a correction instead, which waits beside the original.
        raise PermissionDenied(
            f"memory {current.id!r} is active: an untrusted rewrite cannot replace it; "
            "write a correction (supersedes_id) for review instead"
        )
    for name in ("agent_id", "subject_id", "purpose"):
        if getattr(command, name) != getattr(current, name):
            raise ValidationError.field(name, "cannot change when an item is rewritten")
    if command.supersedes_id is not None and command.supersedes_id != current.supersedes_id:
        raise ValidationError.field("supersedes_id", "cannot change when an item is rewritten")


def _check_correction_target(ctx: Context, command: WriteMemory, target: ItemState | None) -> None:
    if target is None or not visible(ctx.principal, target):
        # Another agent's item is reported exactly like an unknown one: no oracle.
        raise ValidationError.field("supersedes_id", "names no item this credential can see")
    if (target.agent_id, target.purpose) != (command.agent_id, command.purpose):
        raise ValidationError.field(
            "supersedes_id", "the superseded item must share agent_id and purpose"
        )
    if effective_status(target, ctx.now) is not Status.ACTIVE:
        raise ValidationError.field("supersedes_id", "the superseded item must be active")


def _reviewable(
    ctx: Context, memory_id: str, current: ItemState | None, expected: int
) -> ItemState:
    require_review(ctx.principal)
    current = require_visible(ctx.principal, current, memory_id)
    _check_version(memory_id, current, expected)
    status = effective_status(current, ctx.now)
    if status is not Status.QUARANTINED:
        raise InvalidTransition(
            f"memory {memory_id!r} is {status.value}, not quarantined", current.version
        )
    return current


def decide_promote(
    ctx: Context,
    command: PromoteMemory,
    current: ItemState | None,
    target: ItemState | None,
) -> list[Event]:
    """A reviewer other than the writer makes a quarantined item active and verified."""
    item = _reviewable(ctx, command.memory_id, current, command.expected_version)
    require_four_eyes(ctx.principal, item, "promote")
    events: list[Event] = [MemoryPromoted(**ctx.next_of(item))]
    if item.supersedes_id is not None:
        events += _supersede(ctx, item.id, item, target)
    return events


def decide_reject(
    ctx: Context,
    command: RejectMemory,
    current: ItemState | None,
    sealed_reason: bytes | None,
) -> list[Event]:
    """A reviewer other than the writer rejects a quarantined item; it is kept, never
    retrieved."""
    item = _reviewable(ctx, command.memory_id, current, command.expected_version)
    require_four_eyes(ctx.principal, item, "reject")
    return [MemoryRejected(**ctx.next_of(item), reason=sealed_reason)]


def decide_expire(ctx: Context, command: ExpireMemory, current: ItemState | None) -> list[Event]:
    """Retire a live item whose ``expires_at`` has passed."""
    if current is None:
        raise NotFound(f"memory {command.memory_id!r} not found")
    _check_version(command.memory_id, current, command.expected_version)
    if current.status not in LIVE_STATUSES or current.expires_at > ctx.now:
        raise InvalidTransition(f"memory {current.id!r} is not due to expire", current.version)
    return [MemoryExpired(**ctx.next_of(current))]


def decide_forget(
    ctx: Context, command: ForgetSubject, items: Sequence[ItemState], has_key: bool
) -> list[Event]:
    """Delete every item of the subject; with nothing to delete, nothing changes."""
    require_forget(ctx.principal)
    remaining = [item for item in items if item.status is not Status.DELETED]
    if not remaining and not has_key:
        return []
    return [
        SubjectForgotten(
            event_id=ctx.new_id(),
            tenant_id=ctx.principal.tenant_id,
            memory_id=None,
            version=None,
            occurred_at=ctx.now,
            actor=ctx.principal.principal_id,
            idempotency_key=ctx.idempotency_key,
            subject_id=command.subject_id,
        )
    ]


def decide_erase(
    ctx: Context,
    command: EraseMemory,
    current: ItemState | None,
    writers: frozenset[str],
    *,
    legacy: bool,
) -> list[Event]:
    """Erase one item: deleted, the content of every version destroyed with its key.

    ``writers`` are the principals that wrote any version of the item: none of them may
    erase it (four eyes, as for review), since that would destroy the evidence of what
    they wrote. An item already deleted is erased already: nothing changes. ``legacy``
    says the item's content was sealed under its subject's key (written before items had
    keys of their own), so it cannot be destroyed alone.
    """
    require_erase(ctx.principal)
    item = require_visible(ctx.principal, current, command.memory_id)
    require_four_eyes(ctx.principal, item, "erase", writers)
    if item.status is Status.DELETED:
        return []
    if legacy:
        raise InvalidTransition(
            f"memory {item.id!r} was written before memories had keys of their own: its "
            "content is sealed under its subject's key and cannot be destroyed alone; "
            "forget the subject to destroy it",
            item.version,
        )
    return [MemoryErased(**ctx.next_of(item))]


def decide_destroy_content(
    ctx: Context, command: DestroyContent, current: ItemState | None, policy: RetentionPolicy
) -> list[Event]:
    """Destroy the content of an item whose retention window has run out (SPEC §7)."""
    if current is None:
        raise NotFound(f"memory {command.memory_id!r} not found")
    _check_version(command.memory_id, current, command.expected_version)
    if not policy.due(current, ctx.now):
        raise InvalidTransition(
            f"memory {current.id!r} is not past its retention window", current.version
        )
    return [MemoryContentDestroyed(**ctx.next_of(current))]
