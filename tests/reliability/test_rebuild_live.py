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
from governed_memory.core.values import Trust
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


def tamper(store: Store, statement: str, memory_id: str, *more: object) -> None:
    """Run ``statement`` on the item's search rows, behind the service's back, as a lost
    write or a faulty rebuild would leave them: ``:item`` is the item's row id, each
    ``?`` one of ``more`` (after every ``:item``)."""
    mark = "?" if isinstance(store, SQLiteStore) else "%s"
    database = getattr(store, "database")  # noqa: B009 - both SQL stores have one
    with database.write_transaction() as conn:
        rowid = "(SELECT rowid FROM memories WHERE id = ?)"
        params = (memory_id,) * statement.count(":item") + more
        conn.execute(statement.replace(":item", rowid).replace("?", mark), params)


@pytest.fixture
def written(store: Store) -> MemoryService:
    """A service over the store with three searchable items and one quarantined one."""
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
    for number in range(3):
        service.write(ACME, body(id=f"m{number}", content=f"Email habit {number}."))
    untrusted = principal("acme", "agent", trust=Trust.UNTRUSTED)
    service.write(untrusted, body(id="q1", content="Email rumour.", trust="untrusted"))
    assert service.verify_replay().differences == []
    return service


def test_verify_names_an_item_whose_search_rows_were_removed(
    written: MemoryService, store: Store
) -> None:
    """Its postings and document deleted, the item is no longer found; verify says so,
    naming it (and only it), and a rebuild makes it searchable again."""
    tamper(store, "DELETE FROM postings WHERE item = :item", "m1")
    tamper(store, "DELETE FROM search_docs WHERE item = :item", "m1")
    assert ids(written, ACME, "email") == ["m0", "m2"]
    report = written.verify_replay()
    assert report.differences == ["acme/m1: searchable, but missing from the search index"]
    written.maintenance.rebuild()
    assert written.verify_replay().differences == []
    assert ids(written, ACME, "email") == ["m0", "m1", "m2"]


def test_verify_names_a_removed_posting_and_search_rows_of_an_item_not_searchable(
    written: MemoryService, store: Store
) -> None:
    """One posting of an item gone; a posting added to a quarantined item: two
    divergences, each naming its item and what differs, no content."""
    term = written.index_doc("acme", "email").terms
    (term_id,) = list(term)
    tamper(store, "DELETE FROM postings WHERE item = :item AND term = ?", "m2", term_id)
    tamper(
        store,
        # tf 1 in an item of length 2 (impact: tf << 16 | 65535 - length)
        "INSERT INTO postings SELECT scope, term, 65536 + 65533, :item "
        "FROM postings WHERE item <> :item AND term = ? LIMIT 1",
        "q1",
        term_id,
    )
    report = written.verify_replay()
    assert report.differences == [
        "acme/m2: search rows differ from its content's: postings",
        "acme/q1: in the search index, but not searchable (quarantined)",
    ]
    assert not any("habit" in line or "rumour" in line for line in report.differences)
