"""The lifecycle of SPEC §3 as every backend must implement it (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import pytest

from governed_memory.core.values import Scope, Status, Trust
from governed_memory.errors import (
    InvalidTransition,
    NotFound,
    PermissionDenied,
    SelfPromotion,
    ValidationError,
    VersionConflict,
)
from governed_memory.service import MemoryService
from tests.support.fakes import agent_key, body, principal, query, reviewer

WRITER = principal()


def test_an_untrusted_write_is_quarantined_and_invisible_until_promoted(
    service: MemoryService,
) -> None:
    """An agent's write waits in quarantine, is never searched, and is found once promoted."""
    agent = agent_key()
    written = service.write(agent, body(id="m1", trust="untrusted")).item
    assert written.status is Status.QUARANTINED
    assert written.trust is Trust.UNTRUSTED
    assert service.search(agent, query("email")).items == []

    promoted = service.promote(reviewer(), "m1", expected_version=1)

    assert promoted.status is Status.ACTIVE
    assert promoted.trust is Trust.VERIFIED
    assert promoted.version == 2
    assert [hit.item.id for hit in service.search(agent, query("email")).items] == ["m1"]


def test_a_trusted_write_is_active_and_found(service: MemoryService) -> None:
    """A write claiming trust the credential allows is active at once and searchable."""
    result = service.write(WRITER, body(id="m1"))
    assert result.created
    assert result.item.status is Status.ACTIVE
    assert result.item.version == 1
    hits = service.search(WRITER, query("email phone")).items
    assert [hit.item.content for hit in hits] == ["The customer prefers email over phone calls."]


def test_a_stale_expected_version_cannot_overwrite(service: MemoryService) -> None:
    """A write with an old expected version is refused and names the current version."""
    service.write(WRITER, body(id="m1"))
    service.write(WRITER, body(id="m1", content="Second version.", expected_version=1))

    with pytest.raises(VersionConflict) as caught:
        service.write(WRITER, body(id="m1", content="Stale overwrite.", expected_version=1))

    assert caught.value.current_version == 2
    assert service.get(WRITER, "m1").content == "Second version."


def test_creating_an_existing_id_is_a_version_conflict(service: MemoryService) -> None:
    """expected_version 0 means the item must not exist yet."""
    service.write(WRITER, body(id="m1"))
    with pytest.raises(VersionConflict) as caught:
        service.write(WRITER, body(id="m1"))
    assert caught.value.current_version == 1


def test_rewriting_a_missing_item_is_a_version_conflict_at_zero(service: MemoryService) -> None:
    """Expecting version 3 of an item that does not exist reports current version 0."""
    with pytest.raises(VersionConflict) as caught:
        service.write(WRITER, body(id="ghost", expected_version=3))
    assert caught.value.current_version == 0


def test_a_rewrite_replaces_content_and_keeps_history(service: MemoryService) -> None:
    """Rewriting bumps the version, replaces content, and history keeps every change."""
    service.write(WRITER, body(id="m1"))
    result = service.write(WRITER, body(id="m1", content="Now prefers chat.", expected_version=1))
    assert not result.created
    assert result.item.version == 2
    assert [(e.type, e.version) for e in service.history(WRITER, "m1")] == [
        ("memory.written", 1),
        ("memory.written", 2),
    ]


def test_an_untrusted_rewrite_cannot_displace_an_active_item(service: MemoryService) -> None:
    """An active memory is never pulled out of retrieval by an untrusted rewrite."""
    service.write(WRITER, body(id="m1"))
    with pytest.raises(PermissionDenied):
        service.write(
            WRITER,
            body(id="m1", content="Unverified change.", trust="untrusted", expected_version=1),
        )
    item = service.get(WRITER, "m1")
    assert (item.status, item.version) == (Status.ACTIVE, 1)
    assert [h.item.id for h in service.search(WRITER, query("email")).items] == ["m1"]


def test_a_quarantined_item_may_be_rewritten_untrusted(service: MemoryService) -> None:
    """Before review, the writer may still revise what waits in quarantine."""
    service.write(WRITER, body(id="m1", trust="untrusted"))
    item = service.write(
        WRITER, body(id="m1", content="Revised.", trust="untrusted", expected_version=1)
    ).item
    assert (item.status, item.version, item.content) == (Status.QUARANTINED, 2, "Revised.")


def test_another_agents_id_is_taken_without_revealing_its_version(
    service: MemoryService,
) -> None:
    """Creating an id held by an agent the key cannot see says 'in use', nothing more."""
    service.write(WRITER, body(id="shared", agent_id="sales-bot"))
    service.write(WRITER, body(id="shared", agent_id="sales-bot", expected_version=1))
    with pytest.raises(InvalidTransition) as caught:
        service.write(agent_key(), body(id="shared", trust="untrusted"))
    assert caught.value.current_version is None
    assert "2" not in caught.value.detail


def test_a_correction_of_an_invisible_item_looks_like_an_unknown_one(
    service: MemoryService,
) -> None:
    """An agent-bound key learns nothing about another agent's item through supersedes_id."""
    service.write(WRITER, body(id="theirs", agent_id="sales-bot"))
    agent = agent_key()
    errors = []
    for target in ("theirs", "nobody-has-this-id"):
        with pytest.raises(ValidationError) as caught:
            service.write(agent, body(id=f"fix-{target}", trust="untrusted", supersedes_id=target))
        errors.append(caught.value.detail)
    assert errors[0] == errors[1]


def test_a_rewrite_cannot_move_an_item_to_another_subject(service: MemoryService) -> None:
    """Agent, subject and purpose of an item are fixed once written."""
    service.write(WRITER, body(id="m1"))
    with pytest.raises(ValidationError) as caught:
        service.write(WRITER, body(id="m1", subject_id="customer-2", expected_version=1))
    assert caught.value.errors[0].field == "subject_id"


def test_a_correction_supersedes_the_old_item(service: MemoryService) -> None:
    """An active correction marks the old item superseded; search returns only the correction."""
    service.write(WRITER, body(id="old", content="Prefers email contact."))
    service.write(WRITER, body(id="new", content="Prefers phone contact now.", supersedes_id="old"))

    old = service.get(WRITER, "old")
    assert old.status is Status.SUPERSEDED
    assert old.superseded_by == "new"
    assert old.version == 2
    assert service.get(WRITER, "new").supersedes_id == "old"
    assert [h.item.id for h in service.search(WRITER, query("prefers contact")).items] == ["new"]
    assert [e.type for e in service.history(WRITER, "old")] == [
        "memory.written",
        "memory.superseded",
    ]


def test_a_quarantined_correction_supersedes_nothing_until_promoted(
    service: MemoryService,
) -> None:
    """An untrusted correction cannot knock out a verified memory before review."""
    service.write(WRITER, body(id="old", content="Prefers email contact."))
    agent = agent_key()
    service.write(
        agent,
        body(id="fix", content="Prefers fax contact.", trust="untrusted", supersedes_id="old"),
    )
    assert service.get(WRITER, "old").status is Status.ACTIVE
    assert [h.item.id for h in service.search(agent, query("contact")).items] == ["old"]

    service.promote(reviewer(), "fix", expected_version=1)

    assert service.get(WRITER, "old").status is Status.SUPERSEDED
    assert service.get(WRITER, "old").superseded_by == "fix"
    assert [h.item.id for h in service.search(agent, query("contact")).items] == ["fix"]


@pytest.mark.parametrize(
    ("field", "value"), [("agent_id", "sales-bot"), ("purpose", "sales")], ids=["agent", "purpose"]
)
def test_a_correction_across_agent_or_purpose_is_refused(
    service: MemoryService, field: str, value: str
) -> None:
    """The superseded item must share tenant, agent and purpose with the correction."""
    service.write(WRITER, body(id="old"))
    with pytest.raises(ValidationError) as caught:
        service.write(WRITER, body(id="new", supersedes_id="old", **{field: value}))
    assert caught.value.errors[0].field == "supersedes_id"
    assert service.get(WRITER, "old").status is Status.ACTIVE


def test_a_correction_of_a_non_active_or_unknown_item_is_refused(service: MemoryService) -> None:
    """Only an active item can be superseded; an unknown id is a validation error."""
    service.write(WRITER, body(id="q", trust="untrusted"))
    for target in ("q", "missing"):
        with pytest.raises(ValidationError):
            service.write(WRITER, body(id=f"fix-{target}", supersedes_id=target))


def test_a_correction_of_another_tenants_item_is_refused(service: MemoryService) -> None:
    """Supersession never crosses tenants: the other tenant's id is simply unknown."""
    service.write(principal("globex"), body(id="theirs"))
    with pytest.raises(ValidationError):
        service.write(WRITER, body(id="mine", supersedes_id="theirs"))
    assert service.get(principal("globex"), "theirs").status is Status.ACTIVE


def test_nobody_promotes_their_own_write(service: MemoryService) -> None:
    """A principal with the review scope still cannot promote what it wrote."""
    both = principal(name="self-reviewer", scopes=set(Scope))
    service.write(both, body(id="m1", trust="untrusted"))
    with pytest.raises(SelfPromotion):
        service.promote(both, "m1", expected_version=1)
    assert service.get(both, "m1").status is Status.QUARANTINED


def test_promotion_needs_the_review_scope(service: MemoryService) -> None:
    """An agent credential cannot promote at all."""
    service.write(WRITER, body(id="m1", trust="untrusted"))
    with pytest.raises(PermissionDenied):
        service.promote(agent_key(), "m1", expected_version=1)


def test_only_quarantined_items_are_promoted_or_rejected(service: MemoryService) -> None:
    """Promoting or rejecting an active item is an invalid transition."""
    service.write(WRITER, body(id="m1"))
    with pytest.raises(InvalidTransition):
        service.promote(reviewer(), "m1", expected_version=1)
    with pytest.raises(InvalidTransition):
        service.reject(reviewer(), "m1", expected_version=1)


def test_promotion_checks_the_expected_version(service: MemoryService) -> None:
    """A reviewer acting on a stale version gets a conflict, not a promotion."""
    service.write(WRITER, body(id="m1", trust="untrusted"))
    service.write(WRITER, body(id="m1", trust="untrusted", content="Changed.", expected_version=1))
    with pytest.raises(VersionConflict) as caught:
        service.promote(reviewer(), "m1", expected_version=1)
    assert caught.value.current_version == 2


def test_a_rejected_item_is_kept_but_never_retrieved(service: MemoryService) -> None:
    """Rejection is final: the item stays in history and never reaches search."""
    service.write(WRITER, body(id="m1", trust="untrusted"))
    rejected = service.reject(reviewer(), "m1", expected_version=1, reason="Not supported.")
    assert rejected.status is Status.REJECTED
    assert service.search(WRITER, query("email")).items == []
    with pytest.raises(InvalidTransition):
        service.promote(reviewer(), "m1", expected_version=2)
    with pytest.raises(InvalidTransition):
        service.write(WRITER, body(id="m1", expected_version=2))


def test_the_trust_a_write_claims_is_capped_by_the_credential(service: MemoryService) -> None:
    """A key that may write only untrusted gets a refusal for trusted, and nothing is written."""
    with pytest.raises(PermissionDenied):
        service.write(agent_key(), body(id="m1", trust="trusted"))
    assert service.store.head() == 0


def test_no_write_claims_verified(service: MemoryService) -> None:
    """Verified is reached only by promotion."""
    with pytest.raises(ValidationError) as caught:
        service.write(WRITER, body(id="m1", trust="verified"))
    assert caught.value.errors[0].field == "trust"


def test_untrusted_confidence_is_capped(service: MemoryService) -> None:
    """Model-claimed confidence is a hint, capped for untrusted items."""
    item = service.write(agent_key(), body(id="m1", trust="untrusted", confidence=1.0)).item
    assert item.confidence == 0.5


def test_an_agent_bound_key_cannot_act_for_another_agent(service: MemoryService) -> None:
    """Writes for, searches of and reads of another agent's items are refused or unseen."""
    service.write(WRITER, body(id="sales-item", agent_id="sales-bot"))
    agent = agent_key(agent="support-bot")
    with pytest.raises(PermissionDenied):
        service.write(agent, body(id="m1", agent_id="sales-bot", trust="untrusted"))
    with pytest.raises(PermissionDenied):
        service.search(agent, query("email", agent_id="sales-bot"))
    with pytest.raises(NotFound):
        service.get(agent, "sales-item")


def test_another_tenants_item_is_not_found_everywhere(service: MemoryService) -> None:
    """Every operation on another tenant's id answers not found, never forbidden."""
    service.write(principal("globex"), body(id="theirs", trust="untrusted"))
    mine = principal("acme", scopes=set(Scope))
    with pytest.raises(NotFound):
        service.get(mine, "theirs")
    with pytest.raises(NotFound):
        service.history(mine, "theirs")
    with pytest.raises(NotFound):
        service.promote(principal("acme", "rev", scopes=set(Scope)), "theirs", expected_version=1)
    with pytest.raises(NotFound):
        service.reject(mine, "theirs", expected_version=1)
    assert service.list_quarantine(mine).items == []
    assert service.events_after(mine) == []


def test_missing_scopes_are_refused(service: MemoryService) -> None:
    """Each operation needs its scope (SPEC §5)."""
    service.write(WRITER, body(id="m1"))
    nobody = principal(name="nobody", scopes=set())
    calls = [
        lambda: service.write(nobody, body(id="m2")),
        lambda: service.get(nobody, "m1"),
        lambda: service.search(nobody, query()),
        lambda: service.history(nobody, "m1"),
        lambda: service.list_quarantine(nobody),
        lambda: service.events_after(nobody),
        lambda: service.forget_subject(nobody, "customer-1"),
    ]
    for call in calls:
        with pytest.raises(PermissionDenied):
            call()


def test_history_and_the_audit_feed_carry_no_content(service: MemoryService) -> None:
    """Audit views list positions, types, versions and actors only."""
    service.write(WRITER, body(id="m1", content="secret-canary-7781 content"))
    entries = [e.to_dict() for e in service.events_after(WRITER)]
    assert entries[0]["type"] == "memory.written"
    assert "secret-canary-7781" not in repr(entries)
    assert "secret-canary-7781" not in repr([e.to_dict() for e in service.history(WRITER, "m1")])


def test_the_audit_feed_pages_in_position_order(service: MemoryService) -> None:
    """events_after returns positions above the cursor, ascending, at most limit."""
    for n in range(5):
        service.write(WRITER, body(id=f"m{n}"))
    first = service.events_after(WRITER, after=0, limit=2)
    rest = service.events_after(WRITER, after=first[-1].position, limit=10)
    positions = [e.position for e in first + rest]
    assert positions == sorted(positions)
    assert len(set(positions)) == 5


def test_the_review_queue_pages_and_filters(service: MemoryService) -> None:
    """list_quarantine shows only quarantined items of the caller's agents, page by page."""
    for n in range(5):
        service.write(WRITER, body(id=f"q{n}", trust="untrusted"))
    service.write(WRITER, body(id="other", agent_id="sales-bot", trust="untrusted"))
    service.write(WRITER, body(id="active"))
    rev = reviewer()
    first = service.list_quarantine(rev, agent_id="support-bot", limit=3)
    assert len(first.items) == 3
    assert first.next_cursor is not None
    second = service.list_quarantine(rev, agent_id="support-bot", limit=3, cursor=first.next_cursor)
    ids = [i.id for i in first.items + second.items]
    assert sorted(ids) == [f"q{n}" for n in range(5)]
    assert second.next_cursor is None
    bound = principal(name="bound-reviewer", scopes={Scope.MEMORY_REVIEW}, agents={"sales-bot"})
    assert [i.id for i in service.list_quarantine(bound).items] == ["other"]


def test_a_forged_cursor_is_a_validation_error(service: MemoryService) -> None:
    """A cursor the service did not issue is refused clearly."""
    with pytest.raises(ValidationError):
        service.list_quarantine(reviewer(), cursor="not-a-cursor!")


def test_replay_of_the_log_equals_the_projection(service: MemoryService) -> None:
    """After a mix of every operation, rebuilding from the log changes nothing."""
    agent = agent_key()
    service.write(WRITER, body(id="a"))
    service.write(agent, body(id="b", trust="untrusted"))
    service.promote(reviewer(), "b", expected_version=1)
    service.write(agent, body(id="c", trust="untrusted"))
    service.reject(reviewer(), "c", expected_version=1)
    service.write(WRITER, body(id="d", supersedes_id="a", content="Correction."))
    service.write(WRITER, body(id="e", subject_id="customer-2"))
    service.forget_subject(WRITER, "customer-2")
    report = service.verify_replay()
    assert report.ok, report.differences
    assert report.items == 5
    assert report.events == 9  # d's correction also appends a.superseded
