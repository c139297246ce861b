"""Retention (SPEC §7) on every backend: the content of expired, rejected and superseded
memories is destroyed once their window (per kind and status) has run out since they
entered that status; the events left are content-free; several workers are safe."""

from __future__ import annotations

from datetime import timedelta

import pytest

from governed_memory.core.policy import DAY, RetentionPolicy
from governed_memory.core.values import Kind, Scope, Status
from governed_memory.crypto import Keyring
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from tests.support.fakes import FakeClock, body, principal, reviewer
from tests.support.legacy import write_legacy
from tests.support.threads import race

WRITER = principal()
AUDITOR = principal(name="auditor", scopes={Scope.AUDIT_READ, Scope.MEMORY_READ})

#: Expired content kept 10 days (working notes: not at all), rejected 1 day, superseded 30.
POLICY = RetentionPolicy.from_seconds(
    {Status.EXPIRED: 10 * DAY, Status.REJECTED: 1 * DAY, Status.SUPERSEDED: 30 * DAY},
    {(Kind.WORKING_NOTE, Status.EXPIRED): 0},
)


@pytest.fixture
def retaining(store: Store, keyring: Keyring, clock: FakeClock) -> MemoryService:
    """The service over each backend with :data:`POLICY`."""
    return MemoryService(store, keyring, clock=clock, retention=POLICY)


def seed(service: MemoryService, clock: FakeClock) -> None:
    """One memory in each status with a window, one active, one quarantined, all of one
    subject, each entering its status now."""
    service.write(WRITER, body(id="expired", ttl_seconds=60, content="Expired card 4111."))
    service.write(WRITER, body(id="note", kind="working_note", ttl_seconds=60))
    service.write(WRITER, body(id="rejected", trust="untrusted", content="Poison."))
    service.reject(reviewer(), "rejected", expected_version=1, reason="Looks like poison.")
    service.write(WRITER, body(id="old", content="Old address."))
    service.write(WRITER, body(id="new", supersedes_id="old", content="New address."))
    service.write(WRITER, body(id="live", ttl_seconds=86_400 * 60))
    service.write(WRITER, body(id="queued", trust="untrusted", ttl_seconds=86_400 * 60))
    clock.advance(seconds=61)
    assert service.expire_due() == 2


def contents(service: MemoryService) -> dict[str, bool]:
    """Which memories still hold content."""
    ids = ["expired", "note", "rejected", "old", "new", "live", "queued"]
    return {i: service.get(WRITER, i).content is not None for i in ids}


def test_each_window_counts_from_entering_the_status(
    retaining: MemoryService, clock: FakeClock
) -> None:
    """Working notes go at once, rejected after a day, expired facts after ten, superseded
    after thirty; active and quarantined memories keep their content whatever the time."""
    seed(retaining, clock)
    assert retaining.apply_retention().destroyed == 1
    assert not contents(retaining)["note"]
    clock.advance(days=1)
    assert retaining.apply_retention().destroyed == 1
    assert not contents(retaining)["rejected"]
    clock.advance(days=9)
    assert retaining.apply_retention().destroyed == 1
    assert contents(retaining)["old"] and not contents(retaining)["expired"]
    clock.advance(days=20)
    assert retaining.apply_retention().destroyed == 1
    assert contents(retaining) == {
        "expired": False,
        "note": False,
        "rejected": False,
        "old": False,
        "new": True,
        "live": True,
        "queued": True,
    }
    assert retaining.apply_retention().destroyed == 0
    assert retaining.verify_replay().ok


def test_destroying_content_keeps_the_status_and_leaves_content_free_events(
    retaining: MemoryService, clock: FakeClock
) -> None:
    """The memory keeps its status and gains a version; its key row is gone; the event,
    by the retention system, carries only its cause; the rejection reason is gone too."""
    seed(retaining, clock)
    clock.advance(days=30)
    assert retaining.apply_retention().destroyed == 4
    for memory_id, status in [
        ("expired", Status.EXPIRED),
        ("rejected", Status.REJECTED),
        ("old", Status.SUPERSEDED),
    ]:
        item = retaining.get(WRITER, memory_id)
        assert (item.status, item.content) == (status, None)
        assert retaining.store.item_key("acme", memory_id) is None
        state = retaining.store.get("acme", memory_id)
        assert state is not None and state.tokens == 0
        last = retaining.history(AUDITOR, memory_id)[-1]
        assert (last.type, last.actor, last.version) == (
            "memory.content_destroyed",
            "system:retention",
            item.version,
        )
    destroyed = [
        s.event
        for s in retaining.store.events_after("acme", 0, 100)
        if s.event.type == "memory.content_destroyed"
    ]
    assert {getattr(event, "cause", None) for event in destroyed} == {"retention"}
    rejection = retaining.history(AUDITOR, "rejected")[1]
    assert (rejection.type, rejection.reason) == ("memory.rejected", None)
    assert retaining.store.item_key("acme", "new") is not None
    assert retaining.get(WRITER, "new").content == "New address."


def test_a_memory_past_its_window_can_still_be_erased_or_forgotten(
    retaining: MemoryService, clock: FakeClock
) -> None:
    """Destroyed content leaves an item that erase deletes and forget deletes alike."""
    seed(retaining, clock)
    clock.advance(days=30)
    retaining.apply_retention()
    dpo = principal(name="dpo", scopes={Scope.SUBJECT_FORGET})
    assert retaining.erase(dpo, "expired").position == retaining.store.head()
    assert retaining.get(WRITER, "expired").status is Status.DELETED
    assert retaining.forget_subject(dpo, "customer-1").affected == 6
    assert retaining.verify_replay().ok


def test_memories_written_before_items_had_keys_are_skipped_and_counted(
    retaining: MemoryService, clock: FakeClock
) -> None:
    """Their content cannot be destroyed alone: the sweep leaves them and counts them, and
    goes on with the others behind them."""
    write_legacy(retaining, WRITER, body(id="old-a", ttl_seconds=60, content="Legacy a."))
    write_legacy(retaining, WRITER, body(id="old-b", ttl_seconds=60, content="Legacy b."))
    retaining.write(WRITER, body(id="new", ttl_seconds=60))
    clock.advance(seconds=61)
    retaining.expire_due()
    clock.advance(days=10)
    report = retaining.apply_retention(batch_size=1)
    assert (report.destroyed, report.legacy) == (1, 2)
    assert retaining.get(WRITER, "old-a").content == "Legacy a."
    assert retaining.get(WRITER, "new").content is None


def test_two_workers_sweeping_at_once_destroy_each_content_once(
    store: Store, keyring: Keyring, clock: FakeClock
) -> None:
    """Two services on one store sweep together: every due content is destroyed exactly
    once, by one of them (a compare-and-swap on the item's version)."""
    services = [MemoryService(store, keyring, clock=clock, retention=POLICY) for _ in range(2)]
    for number in range(12):
        services[0].write(WRITER, body(id=f"m{number}", kind="working_note", ttl_seconds=60))
    clock.advance(seconds=61)
    assert services[1].expire_due() == 12
    reports = race(2, lambda i: services[i].apply_retention(batch_size=5))
    assert sum(report.destroyed for report in reports) == 12
    events = [
        s.event.memory_id
        for s in store.events_after("acme", 0, 1000)
        if s.event.type == "memory.content_destroyed"
    ]
    assert sorted(events) == sorted(f"m{number}" for number in range(12))
    assert services[0].verify_replay().ok


def test_the_window_is_measured_from_the_status_not_from_the_write(
    retaining: MemoryService, clock: FakeClock
) -> None:
    """A memory written long ago and rejected today keeps its content for the rejected
    window from today."""
    retaining.write(WRITER, body(id="late", trust="untrusted", ttl_seconds=86_400 * 60))
    clock.advance(days=20)
    retaining.reject(reviewer(), "late", expected_version=1)
    assert retaining.apply_retention(clock.now() + timedelta(hours=23)).destroyed == 0
    assert retaining.apply_retention(clock.now() + timedelta(days=1)).destroyed == 1
