"""Time-to-live (SPEC §3): per-kind policy, expiry at read time and by the worker."""

from __future__ import annotations

from datetime import timedelta

import pytest

from governed_memory.core.values import Status
from governed_memory.errors import ValidationError
from governed_memory.service import MemoryService
from tests.support.fakes import FakeClock, body, principal, query

WRITER = principal()


@pytest.mark.parametrize(
    ("kind", "days"), [("working_note", 1), ("fact", 90), ("preference", 180), ("skill", 365)]
)
def test_each_kind_has_its_own_default_ttl(
    service: MemoryService, clock: FakeClock, kind: str, days: int
) -> None:
    """Without expires_at or ttl_seconds an item lives for its kind's default."""
    item = service.write(WRITER, body(id="m", kind=kind)).item
    assert item.expires_at == clock.now() + timedelta(days=days)


def test_ttl_seconds_sets_the_expiry(service: MemoryService, clock: FakeClock) -> None:
    """ttl_seconds counts from the write."""
    item = service.write(WRITER, body(id="m", ttl_seconds=3600)).item
    assert item.expires_at == clock.now() + timedelta(hours=1)


def test_an_explicit_expiry_is_kept(service: MemoryService, clock: FakeClock) -> None:
    """expires_at within the kind's maximum is taken as given."""
    at = clock.now() + timedelta(days=10)
    assert service.write(WRITER, body(id="m", expires_at=at.isoformat())).item.expires_at == at


@pytest.mark.parametrize(
    "overrides",
    [
        {"ttl_seconds": 8 * 86_400, "kind": "working_note"},
        {"expires_at": "2020-01-01T00:00:00Z"},
        {"expires_at": "2030-01-01T00:00:00+00:00", "kind": "working_note"},
        {"expires_at": "2027-01-01T00:00:00Z", "ttl_seconds": 60},
        {"ttl_seconds": 0},
        {"expires_at": "2027-01-01T00:00:00"},
    ],
    ids=["over-max-ttl", "past", "over-max-date", "both", "zero", "naive"],
)
def test_an_invalid_expiry_is_refused_and_nothing_is_written(
    service: MemoryService, overrides: dict[str, object]
) -> None:
    """Past, over-maximum, doubled or timezone-less expiries are validation errors."""
    with pytest.raises(ValidationError):
        service.write(WRITER, body(id="m", **overrides))
    assert service.store.head() == 0


def test_an_expired_item_is_not_returned_even_before_the_sweep(
    service: MemoryService, clock: FakeClock
) -> None:
    """Search filters on expires_at > now itself; it does not wait for the worker."""
    service.write(WRITER, body(id="short", ttl_seconds=60))
    service.write(WRITER, body(id="long"))
    clock.advance(seconds=61)
    assert [h.item.id for h in service.search(WRITER, query("email")).items] == ["long"]


def test_the_sweep_records_one_expiry_event_per_item(
    service: MemoryService, clock: FakeClock
) -> None:
    """expire_due appends memory.expired for each due live item, once."""
    service.write(WRITER, body(id="a", ttl_seconds=60))
    service.write(WRITER, body(id="b", ttl_seconds=60, trust="untrusted"))
    service.write(WRITER, body(id="c"))
    clock.advance(seconds=120)

    assert service.expire_due() == 2
    assert service.expire_due() == 0

    assert service.get(WRITER, "a").status is Status.EXPIRED
    assert service.get(WRITER, "b").status is Status.EXPIRED
    assert service.get(WRITER, "c").status is Status.ACTIVE
    expired = [e for e in service.events_after(WRITER) if e.type == "memory.expired"]
    assert sorted(e.memory_id or "" for e in expired) == ["a", "b"]
    assert all(e.actor == "system:expiry" for e in expired)
    assert service.verify_replay().ok


def test_an_expired_item_cannot_be_promoted(service: MemoryService, clock: FakeClock) -> None:
    """Expiry ends the review too."""
    service.write(WRITER, body(id="a", ttl_seconds=60, trust="untrusted"))
    clock.advance(seconds=61)
    service.expire_due()
    from governed_memory.errors import InvalidTransition
    from tests.support.fakes import reviewer

    with pytest.raises(InvalidTransition):
        service.promote(reviewer(), "a", expected_version=2)


def test_an_expired_but_unswept_item_cannot_be_revived(
    service: MemoryService, clock: FakeClock
) -> None:
    """Past its expiry an item is expired for every rule, even before the worker runs."""
    from governed_memory.errors import InvalidTransition
    from tests.support.fakes import reviewer

    service.write(WRITER, body(id="q", ttl_seconds=60, trust="untrusted"))
    service.write(WRITER, body(id="a", ttl_seconds=60))
    clock.advance(seconds=61)
    with pytest.raises(InvalidTransition):
        service.promote(reviewer(), "q", expected_version=1)
    with pytest.raises(InvalidTransition):
        service.write(WRITER, body(id="a", expected_version=1))
    with pytest.raises(ValidationError):
        service.write(WRITER, body(id="fix", supersedes_id="a"))
    assert service.expire_due() == 2


def test_a_read_says_expired_as_soon_as_expires_at_passes(
    service: MemoryService, clock: FakeClock
) -> None:
    """GET does not wait for the worker: past its expiry an item reads as expired, at the
    version it had; the worker's event then makes it the next version."""
    service.write(WRITER, body(id="a", ttl_seconds=60))
    clock.advance(seconds=60)
    item = service.get(WRITER, "a")
    assert (item.status, item.version) == (Status.EXPIRED, 1)
    service.expire_due()
    assert (service.get(WRITER, "a").status, service.get(WRITER, "a").version) == (
        Status.EXPIRED,
        2,
    )
