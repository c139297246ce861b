"""Verifying the hash chain (service.chain_audit), as properties: whichever event of a
log of several tenants is edited, deleted or swapped with a later one of its tenant, the
first break reported is where the chain says it must be, and only its tenant breaks."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from functools import cache

from hypothesis import given
from hypothesis import strategies as st

from governed_memory.crypto import Keyring
from governed_memory.records import ChainLink
from governed_memory.service import MemoryService
from governed_memory.service.chain_audit import EDITED, MISPLACED, verify_chain
from governed_memory.store.memory import MemoryStore
from tests.support.fakes import FakeClock, body, principal

TENANTS = ("acme", "globex", "initech")


@cache
def honest_log() -> tuple[ChainLink, ...]:
    """Twelve chained events of three tenants, interleaved, as the store linked them."""
    store = MemoryStore()
    service = MemoryService(store, Keyring(bytes(32)), clock=FakeClock())
    for n in range(12):
        who = principal(tenant=TENANTS[n % 3 if n % 4 else 0])
        service.write(who, body(id=f"m{n}", content=f"Note {n}."))
    return tuple(store.chain_links(None, 0, 100))


@dataclasses.dataclass
class FakeLog:
    """An event log that is nothing but its stored links (the chain port of a store)."""

    links: list[ChainLink]

    def tenants(self) -> list[str]:
        return sorted({link.tenant_id for link in self.links})

    def chain_links(self, tenant_id: str | None, after: int, limit: int) -> list[ChainLink]:
        found = [
            link
            for link in sorted(self.links, key=lambda link: link.position)
            if link.position > after and tenant_id in (None, link.tenant_id)
        ]
        return found[:limit]


def breaks(links: list[ChainLink]) -> list[tuple[str, int, str]]:
    report = verify_chain(FakeLog(links))  # type: ignore[arg-type]
    return [(b.tenant_id, b.position, b.problem) for b in report.breaks]


def later_of_tenant(links: tuple[ChainLink, ...], index: int) -> Iterator[int]:
    tenant = links[index].tenant_id
    return (j for j in range(index + 1, len(links)) if links[j].tenant_id == tenant)


def test_the_honest_log_verifies_clean() -> None:
    """Nothing changed, nothing reported: twelve events in three tenants."""
    report = verify_chain(FakeLog(list(honest_log())))  # type: ignore[arg-type]
    assert (report.ok, report.events, report.tenants) == (True, 12, 3)


@given(st.integers(0, 11), st.integers(0, 10), st.sampled_from(["x", "", "Z" * 40]))
def test_any_edited_column_of_any_event_is_named_there(index: int, column: int, value: str) -> None:
    """Editing any column but the tenant of any event names that event as edited."""
    links = list(honest_log())
    original = links[index]
    columns = list(original.columns)
    if column == 2 or columns[column] == value:  # the tenant moves it: another test
        return
    columns[column] = value
    links[index] = dataclasses.replace(original, columns=tuple(columns))
    assert breaks(links) == [(original.tenant_id, original.position, EDITED)]


@given(st.integers(0, 11))
def test_any_deleted_event_is_named_by_its_tenants_next_event(index: int) -> None:
    """Deleting an event breaks its tenant at its next event; deleting a tenant's last
    event is invisible to the chain alone (recorded heads show it)."""
    links = list(honest_log())
    gone = links.pop(index)
    following = next(later_of_tenant(honest_log(), index), None)
    expected = [] if following is None else [(gone.tenant_id, honest_log()[following].position)]
    assert [(t, p) for t, p, _ in breaks(links)] == expected
    assert all(problem == MISPLACED for _, _, problem in breaks(links))


@given(st.integers(0, 11), st.data())
def test_two_swapped_events_of_a_tenant_are_named_at_the_first(
    index: int, data: st.DataObject
) -> None:
    """Swapping two events of one tenant (their positions kept) breaks it where the
    earlier of them stood."""
    later = list(later_of_tenant(honest_log(), index))
    if not later:
        return
    other = data.draw(st.sampled_from(later))
    links = list(honest_log())
    first, second = links[index], links[other]
    links[index] = dataclasses.replace(second, position=first.position)
    links[other] = dataclasses.replace(first, position=second.position)
    assert breaks(links) == [(first.tenant_id, first.position, MISPLACED)]
