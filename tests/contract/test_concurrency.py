"""Optimistic concurrency and idempotency under real threads, on every backend."""

from __future__ import annotations

import pytest

from governed_memory.core.values import Scope
from governed_memory.errors import (
    IdempotencyKeyReused,
    NotFound,
    PermissionDenied,
    VersionConflict,
)
from governed_memory.service import MemoryService
from tests.support.fakes import body, principal
from tests.support.threads import race

WRITER = principal()


def test_sixteen_writers_with_one_expected_version_have_one_winner(
    service: MemoryService,
) -> None:
    """Exactly one of 16 concurrent rewrites of version 1 succeeds; the rest conflict."""
    service.write(WRITER, body(id="m1"))
    results = race(
        16,
        lambda i: service.write(WRITER, body(id="m1", content=f"Writer {i}.", expected_version=1)),
    )
    winners = [r for r in results if not isinstance(r, Exception)]
    conflicts = [r for r in results if isinstance(r, VersionConflict)]
    assert len(winners) == 1
    assert len(conflicts) == 15
    assert service.get(WRITER, "m1").version == 2
    assert service.verify_replay().ok


def test_sixteen_creators_of_one_id_have_one_winner(service: MemoryService) -> None:
    """expected_version 0 is a uniqueness guarantee under concurrency."""
    results = race(16, lambda i: service.write(WRITER, body(id="new", content=f"Creator {i}.")))
    assert sum(not isinstance(r, Exception) for r in results) == 1
    assert sum(isinstance(r, VersionConflict) for r in results) == 15


def test_retrying_with_one_idempotency_key_returns_the_first_result(
    service: MemoryService,
) -> None:
    """The same key and request returns the first item without a second event."""
    first = service.write(WRITER, body(), idempotency_key="req-1")
    head = service.store.head()
    again = service.write(WRITER, body(), idempotency_key="req-1")
    assert again == first
    assert service.store.head() == head


def test_a_server_generated_id_is_stable_across_retries(service: MemoryService) -> None:
    """Without an id, a retried request still names the one item it created."""
    first = service.write(WRITER, body(), idempotency_key="req-2")
    again = service.write(WRITER, body(), idempotency_key="req-2")
    assert first.item.id == again.item.id


def test_an_idempotency_key_reused_for_another_request_is_refused(
    service: MemoryService,
) -> None:
    """The same key with a different request is a conflict, and nothing is written."""
    service.write(WRITER, body(id="m1"), idempotency_key="req-3")
    head = service.store.head()
    with pytest.raises(IdempotencyKeyReused):
        service.write(WRITER, body(id="m1", content="Different."), idempotency_key="req-3")
    with pytest.raises(IdempotencyKeyReused):
        service.forget_subject(WRITER, "customer-1", idempotency_key="req-3")
    assert service.store.head() == head


def test_idempotency_keys_are_scoped_per_tenant(service: MemoryService) -> None:
    """Two tenants may use the same key independently."""
    a = service.write(principal("acme"), body(id="m1"), idempotency_key="shared")
    b = service.write(principal("globex"), body(id="m1"), idempotency_key="shared")
    assert a.item.tenant_id == "acme"
    assert b.item.tenant_id == "globex"
    assert service.store.head() == 2


def test_twelve_concurrent_retries_of_one_key_make_one_event(service: MemoryService) -> None:
    """Concurrent retries of one idempotency key commit one event and answer identically."""
    results = race(12, lambda i: service.write(WRITER, body(), idempotency_key="burst"))
    assert all(not isinstance(r, Exception) for r in results), results
    assert len({r.item for r in results}) == 1
    assert service.store.head() == 1


def test_an_idempotent_replay_survives_a_later_change(service: MemoryService) -> None:
    """A retry after the item changed still returns the result of the first request."""
    first = service.write(WRITER, body(id="m1"), idempotency_key="req-4")
    service.write(WRITER, body(id="m1", content="Changed later.", expected_version=1))
    again = service.write(WRITER, body(id="m1"), idempotency_key="req-4")
    assert again.item == first.item


def test_idempotent_review_and_forget(service: MemoryService) -> None:
    """Promote, reject and forget honour idempotency keys too."""
    service.write(WRITER, body(id="q1", trust="untrusted"))
    service.write(WRITER, body(id="q2", trust="untrusted"))
    rev = principal(name="reviewer")
    promoted = service.promote(rev, "q1", 1, idempotency_key="p")
    assert service.promote(rev, "q1", 1, idempotency_key="p") == promoted
    rejected = service.reject(rev, "q2", 1, reason="No.", idempotency_key="r")
    assert service.reject(rev, "q2", 1, reason="No.", idempotency_key="r") == rejected
    forgotten = service.forget_subject(WRITER, "customer-1", idempotency_key="f")
    assert service.forget_subject(WRITER, "customer-1", idempotency_key="f") == forgotten
    assert forgotten.affected == 2
    assert service.store.head() == 5


def test_concurrent_writers_of_distinct_items_all_commit_in_order(
    service: MemoryService,
) -> None:
    """Many concurrent writes all land; positions are unique and the feed is in order."""
    results = race(16, lambda i: service.write(WRITER, body(id=f"m{i}")))
    assert all(not isinstance(r, Exception) for r in results), results
    positions = [e.position for e in service.events_after(WRITER, limit=100)]
    assert positions == sorted(positions)
    assert len(set(positions)) == 16
    assert service.verify_replay().ok


def test_an_idempotent_replay_shows_nothing_a_get_would_not(service: MemoryService) -> None:
    """A reviewer bound to another agent reusing a key learns nothing about the item."""
    service.write(WRITER, body(id="secret", trust="untrusted"))
    own = principal(name="rev-a", scopes={Scope.MEMORY_REVIEW}, agents={"support-bot"})
    other = principal(name="rev-b", scopes={Scope.MEMORY_REVIEW}, agents={"sales-bot"})
    service.promote(own, "secret", 1, idempotency_key="promote-secret")
    with pytest.raises(NotFound):
        service.promote(other, "secret", 1, idempotency_key="promote-secret")


def test_the_audit_feed_needs_a_key_for_every_agent(service: MemoryService) -> None:
    """The tenant-wide feed names every agent's items, so agent-bound keys cannot read it."""
    service.write(WRITER, body(id="m1"))
    bound = principal(name="auditor", scopes={Scope.AUDIT_READ}, agents={"support-bot"})
    with pytest.raises(PermissionDenied):
        service.events_after(bound)
    assert [e.type for e in service.history(bound, "m1")] == ["memory.written"]
