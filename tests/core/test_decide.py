"""``decide``: the status-transition rules as pure functions, without any store."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from governed_memory.core import access, lifecycle
from governed_memory.core.commands import (
    ExpireMemory,
    ForgetSubject,
    PromoteMemory,
    RejectMemory,
    WriteMemory,
)
from governed_memory.core.events import (
    MemoryPromoted,
    MemorySuperseded,
    MemoryWritten,
    SubjectForgotten,
)
from governed_memory.core.lifecycle import Context, SealedContent
from governed_memory.core.model import ItemState, Principal
from governed_memory.core.projection import apply
from governed_memory.core.values import Scope, Status, Trust
from governed_memory.errors import (
    InvalidTransition,
    NotFound,
    PermissionDenied,
    SelfPromotion,
    VersionConflict,
)
from tests.support.fakes import START, agent_key, body, principal

SEALED = SealedContent(b"\x01sealed", "hash", 7)


def ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"e{next(counter)}"


def ctx(who: Principal | None = None) -> Context:
    return Context(now=START, principal=who or principal(), new_id=ids())


def written(
    memory_id: str = "m1", target: ItemState | None = None, **overrides: object
) -> ItemState:
    command = WriteMemory.parse(body(**overrides))
    events = lifecycle.decide_write(ctx(), command, memory_id, SEALED, None, target)
    return apply(None, events[0])


def test_a_trusted_write_produces_one_active_written_event() -> None:
    """Creation yields memory.written at version 1 with status active."""
    events = lifecycle.decide_write(ctx(), WriteMemory.parse(body()), "m1", SEALED, None, None)
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, MemoryWritten)
    assert (event.version, event.status, event.actor) == (1, Status.ACTIVE, "writer")
    assert event.content == SEALED.blob


def test_an_untrusted_write_is_quarantined() -> None:
    """Trust untrusted means quarantine."""
    assert written(trust="untrusted").status is Status.QUARANTINED


def test_decisions_do_not_read_the_clock() -> None:
    """Two decisions with the same context and input are identical."""
    command = WriteMemory.parse(body())
    a = lifecycle.decide_write(ctx(), command, "m1", SEALED, None, None)
    b = lifecycle.decide_write(ctx(), command, "m1", SEALED, None, None)
    assert a == b


def test_an_active_correction_supersedes_in_the_same_decision() -> None:
    """The correction's written event is followed by the target's superseded event."""
    target = written("old")
    command = WriteMemory.parse(body(supersedes_id="old"))
    events = lifecycle.decide_write(ctx(), command, "new", SEALED, None, target)
    assert [type(e) for e in events] == [MemoryWritten, MemorySuperseded]
    superseded = apply(target, events[1])
    assert superseded.status is Status.SUPERSEDED
    assert superseded.superseded_by == "new"
    assert superseded.version == 2


def test_a_quarantined_correction_decides_no_supersession() -> None:
    """Only the written event; the target is untouched until promotion."""
    target = written("old")
    command = WriteMemory.parse(body(supersedes_id="old", trust="untrusted"))
    events = lifecycle.decide_write(ctx(), command, "new", SEALED, None, target)
    assert [type(e) for e in events] == [MemoryWritten]


def test_promoting_a_correction_supersedes_its_still_active_target() -> None:
    """Promotion makes the correction take effect."""
    target = written("old")
    correction = written("new", target, trust="untrusted", supersedes_id="old")
    events = lifecycle.decide_promote(
        ctx(principal(name="rev")), PromoteMemory("new", 1), correction, target
    )
    assert [type(e) for e in events] == [MemoryPromoted, MemorySuperseded]


def test_a_correction_whose_target_left_active_stands_alone_on_promotion() -> None:
    """If the target expired meanwhile, promotion supersedes nothing."""
    target = written("old")
    expired = lifecycle.decide_expire(
        Context(now=target.expires_at, principal=principal(), new_id=ids()),
        ExpireMemory("old", 1),
        target,
    )
    gone = apply(target, expired[0])
    correction = written("new", target, trust="untrusted", supersedes_id="old")
    events = lifecycle.decide_promote(
        ctx(principal(name="rev")), PromoteMemory("new", 1), correction, gone
    )
    assert [type(e) for e in events] == [MemoryPromoted]


def test_review_rules() -> None:
    """Review needs the scope, a quarantined item, the right version and another principal."""
    item = written(trust="untrusted")
    with pytest.raises(PermissionDenied):
        lifecycle.decide_promote(ctx(agent_key()), PromoteMemory("m1", 1), item, None)
    with pytest.raises(SelfPromotion):
        lifecycle.decide_promote(ctx(), PromoteMemory("m1", 1), item, None)
    with pytest.raises(VersionConflict):
        lifecycle.decide_promote(ctx(principal(name="rev")), PromoteMemory("m1", 5), item, None)
    with pytest.raises(NotFound):
        lifecycle.decide_promote(ctx(principal(name="rev")), PromoteMemory("m1", 1), None, None)
    with pytest.raises(NotFound):
        lifecycle.decide_reject(ctx(principal("globex", "rev")), RejectMemory("m1", 1), item, None)
    active = written()
    with pytest.raises(InvalidTransition):
        lifecycle.decide_reject(ctx(principal(name="rev")), RejectMemory("m1", 1), active, None)


def test_expiry_needs_a_due_live_item() -> None:
    """An item that is not yet due cannot be expired."""
    item = written()
    with pytest.raises(InvalidTransition):
        lifecycle.decide_expire(ctx(), ExpireMemory("m1", 1), item)


def test_forget_needs_its_scope_and_is_silent_when_nothing_is_left() -> None:
    """Forget produces one event, or none when no item and no key remain."""
    item = written()
    forget = ForgetSubject("customer-1")
    with pytest.raises(PermissionDenied):
        lifecycle.decide_forget(ctx(agent_key()), forget, [item], True)
    events = lifecycle.decide_forget(ctx(), forget, [item], True)
    assert [type(e) for e in events] == [SubjectForgotten]
    assert lifecycle.decide_forget(ctx(), forget, [], False) == []


def test_every_scope_is_needed_for_its_own_operation_only() -> None:
    """A principal with only memory:read cannot write."""
    reader = principal(name="reader", scopes={Scope.MEMORY_READ})
    with pytest.raises(PermissionDenied):
        lifecycle.decide_write(ctx(reader), WriteMemory.parse(body()), "m1", SEALED, None, None)


def test_a_write_decided_before_sealing_receives_its_content_unchanged_otherwise() -> None:
    """Deciding with the empty slot, then filling it, equals deciding with the content."""
    command = WriteMemory.parse(body())
    unsealed = lifecycle.decide_write(ctx(), command, "m1", lifecycle.UNSEALED, None, None)
    sealed = lifecycle.decide_write(ctx(), command, "m1", SEALED, None, None)
    assert lifecycle.with_content(unsealed, SEALED) == sealed


def test_a_rejection_decided_without_its_reason_receives_it_afterwards() -> None:
    """The sealed reason fills the decided rejection; nothing else about it changes."""
    item = written(trust="untrusted")
    reviewer = principal(name="rev")
    bare = lifecycle.decide_reject(ctx(reviewer), RejectMemory("m1", 1, "No."), item, None)
    reasoned = lifecycle.decide_reject(ctx(reviewer), RejectMemory("m1", 1, "No."), item, b"r")
    assert lifecycle.with_reason(bare, b"r") == reasoned


def test_every_event_of_one_decision_shares_its_header() -> None:
    """Time, actor and idempotency key come from the context; each event gets its own id."""
    target = written("old")
    correction = written("new", target, trust="untrusted", supersedes_id="old")
    keyed = Context(now=START, principal=principal(name="rev"), new_id=ids(), idempotency_key="k")
    events = lifecycle.decide_promote(keyed, PromoteMemory("new", 1), correction, target)
    assert {(e.occurred_at, e.actor, e.idempotency_key) for e in events} == {(START, "rev", "k")}
    assert [(e.event_id, e.memory_id, e.version) for e in events] == [
        ("e1", "new", 2),
        ("e2", "old", 2),
    ]


def test_the_write_rule_is_the_same_for_the_service_and_the_decision() -> None:
    """access.require_write refuses exactly what decide_write refuses, with its words."""
    capped = principal(name="capped", trust=Trust.UNTRUSTED)
    command = WriteMemory.parse(body(trust="trusted"))
    with pytest.raises(PermissionDenied) as in_access:
        access.require_write(capped, command)
    with pytest.raises(PermissionDenied) as in_decide:
        lifecycle.decide_write(ctx(capped), command, "m1", SEALED, None, None)
    assert str(in_access.value) == str(in_decide.value)
