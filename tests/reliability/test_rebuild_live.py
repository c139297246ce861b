"""``gmem replay`` on a live store, and ``replay --verify`` of the search index (issue 13,
defect 6).

A rebuild runs in one instance while another keeps writing new subjects: before the
rebuild swaps a tenant in (it folds again), and between two tenants. Every item written
is searchable afterwards, in both instances. Verify compares the search rows too: a
search row removed or added behind the service's back is a divergence it names.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from governed_memory.core.model import Principal
from governed_memory.crypto import Keyring
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from governed_memory.service.reindex import Progress
from governed_memory.store.sqlite import SQLiteStore
from tests.conftest import make_store, postgres_dsn
from tests.support.fakes import FakeClock, body, principal, query

ACME = principal("acme")
GLOBEX = principal("globex")


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from make_store(request.param, tmp_path)


def second_instance(store: Store) -> Store:
    """Another store object on the same database, as a second process would open it."""
    if isinstance(store, SQLiteStore):
        return SQLiteStore(store.path)
    from governed_memory.store.postgres import PostgresStore

    schema = getattr(store, "schema")  # noqa: B009 - a PostgresStore's
    return PostgresStore(postgres_dsn() or "", schema=schema)


def ids(service: MemoryService, who: Principal, text: str) -> list[str]:
    return sorted(hit.item.id for hit in service.search(who, query(text)).items)


class Meanwhile:
    """A rebuild's progress callback that runs each action once, the first time the
    rebuild's progress satisfies its condition (the rebuild reports after each fold,
    before the swap, and after each tenant)."""

    def __init__(self) -> None:
        self.pending: list[tuple[Callable[[Progress], bool], Callable[[], object]]] = []

    def when(self, condition: Callable[[Progress], bool], action: Callable[[], object]) -> None:
        self.pending.append((condition, action))

    def __call__(self, progress: Progress) -> None:
        for entry in list(self.pending):
            if entry[0](progress):
                self.pending.remove(entry)
                entry[1]()


def test_items_of_new_subjects_written_during_a_rebuild_are_searchable(store: Store) -> None:
    """One instance rebuilds while another writes items of subjects it has never seen:
    one after the first tenant's fold (before its swap), two between the tenants. Every
    item is found by search in both instances, and verify finds the store clean."""
    keyring_secret = secrets.token_bytes(32)
    live = MemoryService(store, Keyring(keyring_secret), clock=FakeClock())
    other = second_instance(store)
    rebuilder = MemoryService(other, Keyring(keyring_secret), clock=FakeClock())
    try:
        live.write(ACME, body(id="a0", content="Old email habit.", subject_id="s0"))
        live.write(GLOBEX, body(id="g0", content="Old email habit.", subject_id="s0"))
        meanwhile = Meanwhile()
        meanwhile.when(
            lambda p: p.tenants_done == 0 and p.items > 0,
            lambda: live.write(ACME, body(id="a1", content="Email first.", subject_id="s1")),
        )
        meanwhile.when(
            lambda p: p.tenants_done == 1,
            lambda: (
                live.write(ACME, body(id="a2", content="Email later.", subject_id="s2")),
                live.write(GLOBEX, body(id="g1", content="Email too.", subject_id="s1")),
            ),
        )
        assert rebuilder.maintenance.rebuild(meanwhile) == 4
        assert not meanwhile.pending
        for service in (live, rebuilder):
            assert ids(service, ACME, "email") == ["a0", "a1", "a2"]
            assert ids(service, GLOBEX, "email") == ["g0", "g1"]
        report = rebuilder.verify_replay()
        assert report.differences == []
    finally:
        other.close()
