"""Reading newest first, on every backend: the review queue and a browse in descending
(updated_at, id) order with keyset paging, and the audit feed from the latest event back."""

from __future__ import annotations

import pytest

from governed_memory.core.values import Scope
from governed_memory.errors import PermissionDenied, ValidationError
from governed_memory.service import MemoryService
from tests.support.fakes import FakeClock, body, principal, reviewer

WRITER = principal()
AUDITOR = principal(name="auditor", scopes={Scope.AUDIT_READ})


def quarantine_in_turn(service: MemoryService, clock: FakeClock, ids: list[str]) -> None:
    """Untrusted writes of ``ids``, a minute apart, in that order."""
    for memory_id in ids:
        service.write(WRITER, body(id=memory_id, trust="untrusted"))
        clock.advance(minutes=1)


def test_the_queue_newest_first_pages_back_to_the_oldest(
    service: MemoryService, clock: FakeClock
) -> None:
    """Written z, y, x, w, v (so the ids sort the other way), read newest first two at a
    time: v w, x y, z; an item that changes moves to the front, never seen twice forward."""
    quarantine_in_turn(service, clock, ["z", "y", "x", "w", "v"])
    service.write(principal("globex"), body(id="g1", trust="untrusted"))
    seen, cursor = [], None
    while True:
        page = service.browse(WRITER, status="quarantined", order="newest", limit=2, cursor=cursor)
        seen.append([item.id for item in page.items])
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [["v", "w"], ["x", "y"], ["z"]]
    oldest = service.browse(WRITER, status="quarantined", order="oldest")
    assert [item.id for item in oldest.items] == ["z", "y", "x", "w", "v"]
    assert [item.id for item in service.browse(WRITER, status="quarantined").items] == [
        "z",
        "y",
        "x",
        "w",
        "v",
    ]


def test_newest_first_keeps_every_filter(service: MemoryService, clock: FakeClock) -> None:
    quarantine_in_turn(service, clock, ["a", "b", "c"])
    service.write(WRITER, body(id="d", trust="untrusted", agent_id="sales-bot"))
    service.reject(reviewer(), "b", expected_version=1)
    page = service.browse(WRITER, status="quarantined", agent_id="support-bot", order="newest")
    assert [item.id for item in page.items] == ["c", "a"]


def test_an_unknown_order_is_a_validation_error(service: MemoryService) -> None:
    with pytest.raises(ValidationError):
        service.browse(WRITER, order="sideways")


def test_the_feed_newest_first_pages_back_through_the_tenants_events(
    service: MemoryService, clock: FakeClock
) -> None:
    """Below a position, newest first, the tenant's events only; the same events as the
    feed forward, reversed."""
    quarantine_in_turn(service, clock, ["m1", "m2"])
    service.write(principal("globex"), body(id="g1"))
    service.promote(reviewer(), "m1", expected_version=1)
    forward = [event.position for event in service.events_after(AUDITOR, 0, 100)]
    assert len(forward) == 3
    newest = service.events_before(AUDITOR, None, 2)
    assert [event.position for event in newest] == forward[:0:-1]
    older = service.events_before(AUDITOR, newest[-1].position, 2)
    assert [event.position for event in older] == forward[:1]
    assert service.events_before(AUDITOR, older[-1].position, 2) == []
    assert newest[0].type == "memory.promoted"


def test_the_feed_newest_first_needs_what_the_feed_needs(service: MemoryService) -> None:
    with pytest.raises(PermissionDenied):
        service.events_before(principal(scopes={Scope.MEMORY_READ}), None, 10)
    bound = principal(name="auditor", scopes={Scope.AUDIT_READ}, agents={"support-bot"})
    with pytest.raises(PermissionDenied):
        service.events_before(bound, None, 10)
    for before, limit in ((0, 10), (None, 0), (10**19, 10)):
        with pytest.raises(ValidationError):
            service.events_before(AUDITOR, before, limit)
