"""``decide``: every rule of the status-transition table (SPEC §3), and nothing else.

Each function takes the current state (loaded by the service), a validated command and a
context carrying ``now``, the acting principal and an id source, and returns the events
the command produces, or raises a domain error. No IO, no clock, no randomness of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from governed_memory.core.access import require_agent, require_scope, visible
from governed_memory.core.commands import (
    ExpireMemory,
    ForgetSubject,
    PromoteMemory,
    RejectMemory,
    WriteMemory,
)
from governed_memory.core.events import (
    Event,
    MemoryExpired,
    MemoryPromoted,
    MemoryRejected,
    MemorySuperseded,
    MemoryWritten,
    SubjectForgotten,
)
from governed_memory.core.model import LIVE_STATUSES, ItemState, Principal
from governed_memory.core.policy import TtlPolicy, capped_confidence
from governed_memory.core.values import Scope, Status, Trust
from governed_memory.errors import (
    InvalidTransition,
    NotFound,
    PermissionDenied,
    SelfPromotion,
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


@dataclass(frozen=True, slots=True)
class SealedContent:
    """Content already encrypted by the service for the version the write will produce."""

    blob: bytes
    content_hash: str
    tokens: int


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
    return [
        MemorySuperseded(
            event_id=ctx.new_id(),
            tenant_id=target.tenant_id,
            memory_id=target.id,
            version=target.version + 1,
            occurred_at=ctx.now,
            actor=ctx.principal.principal_id,
            idempotency_key=ctx.idempotency_key,
            superseded_by=correction_id,
        )
    ]


def decide_write(
    ctx: Context,
    command: WriteMemory,
    memory_id: str,
    sealed: SealedContent,
    current: ItemState | None,
    target: ItemState | None,
) -> list[Event]:
    """Create or rewrite an item; quarantine what is untrusted; apply a correction."""
    principal = ctx.principal
    require_scope(principal, Scope.MEMORY_WRITE)
    require_agent(principal, command.agent_id)
    if not principal.may_claim(command.trust):
        raise PermissionDenied(
            f"this credential may write trust up to {principal.max_trust.value}, "
            f"not {command.trust.value}"
        )
    if current is not None and not visible(principal, current):
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

    status = Status.QUARANTINED if command.trust is Trust.UNTRUSTED else Status.ACTIVE
    supersedes_id = command.supersedes_id if current is None else current.supersedes_id
    written = MemoryWritten(
        event_id=ctx.new_id(),
        tenant_id=principal.tenant_id,
        memory_id=memory_id,
        version=command.expected_version + 1,
        occurred_at=ctx.now,
        actor=principal.principal_id,
        idempotency_key=ctx.idempotency_key,
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


def effective_status(item: ItemState, now: datetime) -> Status:
    """The item's status at ``now``: a live item past its expiry is expired already,
    whether or not the expiry worker has recorded it yet."""
    if item.status in LIVE_STATUSES and item.expires_at <= now:
        return Status.EXPIRED
    return item.status


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
    require_scope(ctx.principal, Scope.MEMORY_REVIEW)
    if current is None or not visible(ctx.principal, current):
        raise NotFound(f"memory {memory_id!r} not found")
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
    if item.written_by == ctx.principal.principal_id:
        raise SelfPromotion(f"memory {item.id!r} was written by this principal")
    events: list[Event] = [
        MemoryPromoted(
            event_id=ctx.new_id(),
            tenant_id=item.tenant_id,
            memory_id=item.id,
            version=item.version + 1,
            occurred_at=ctx.now,
            actor=ctx.principal.principal_id,
            idempotency_key=ctx.idempotency_key,
        )
    ]
    if item.supersedes_id is not None:
        events += _supersede(ctx, item.id, item, target)
    return events


def decide_reject(
    ctx: Context,
    command: RejectMemory,
    current: ItemState | None,
    sealed_reason: bytes | None,
) -> list[Event]:
    """A reviewer rejects a quarantined item; it is kept, never retrieved."""
    item = _reviewable(ctx, command.memory_id, current, command.expected_version)
    return [
        MemoryRejected(
            event_id=ctx.new_id(),
            tenant_id=item.tenant_id,
            memory_id=item.id,
            version=item.version + 1,
            occurred_at=ctx.now,
            actor=ctx.principal.principal_id,
            idempotency_key=ctx.idempotency_key,
            reason=sealed_reason,
        )
    ]


def decide_expire(ctx: Context, command: ExpireMemory, current: ItemState | None) -> list[Event]:
    """Retire a live item whose ``expires_at`` has passed."""
    if current is None:
        raise NotFound(f"memory {command.memory_id!r} not found")
    _check_version(command.memory_id, current, command.expected_version)
    if current.status not in LIVE_STATUSES or current.expires_at > ctx.now:
        raise InvalidTransition(f"memory {current.id!r} is not due to expire", current.version)
    return [
        MemoryExpired(
            event_id=ctx.new_id(),
            tenant_id=current.tenant_id,
            memory_id=current.id,
            version=current.version + 1,
            occurred_at=ctx.now,
            actor=ctx.principal.principal_id,
            idempotency_key=ctx.idempotency_key,
        )
    ]


def decide_forget(
    ctx: Context, command: ForgetSubject, items: Sequence[ItemState], has_key: bool
) -> list[Event]:
    """Delete every item of the subject; with nothing to delete, nothing changes."""
    require_scope(ctx.principal, Scope.SUBJECT_FORGET)
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
