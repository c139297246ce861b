"""A rebuild writes only the projection rows that differ from the fold of the log (issue
16), on SQLite and PostgreSQL: over an intact projection it writes nothing, and any row
damaged behind the service's back — a column of an item's row, an item's row missing or
extra, a document, a posting missing, extra, altered or moved, a vector, a scope's totals
— is found and repaired, so every projection table ends exactly as the writes left it."""

# ruff: noqa: S608 - the statements are this test's own constants: no input reaches them

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from governed_memory.codec import ITEM_COLUMNS
from governed_memory.core.values import Scope, Trust
from governed_memory.crypto import Keyring
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from governed_memory.store import rebuild_diff
from governed_memory.store.search_rows import document_terms
from governed_memory.store.sqlite import SQLiteStore, sql
from governed_memory.store.sqlite import search as sqlite_search
from tests.conftest import make_store
from tests.support.fakes import FakeClock, body, principal, query

ACME = principal("acme")
GLOBEX = principal("globex")
DPO = principal("acme", name="dpo", scopes={Scope.SUBJECT_FORGET, Scope.MEMORY_READ})
ITEM = "(SELECT rowid FROM memories WHERE tenant_id = 'acme' AND id = 'm1')"
OTHER = "(SELECT rowid FROM memories WHERE tenant_id = 'acme' AND id = 'm2')"
SCOPE = f"(SELECT scope FROM search_docs WHERE item = {ITEM})"
GLOBEX_SCOPE = "(SELECT id FROM scopes WHERE tenant_id = 'globex')"
DOCUMENT = "item, scope, length, confidence, updated_at, expires_at, kind, terms, tfs"
SALES = (
    "(SELECT id FROM scopes WHERE tenant_id = 'acme' AND agent_id = 'sales-bot' "
    "AND purpose = 'support')"
)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from make_store(request.param, tmp_path)


@pytest.fixture
def service(store: Store) -> MemoryService:
    return two_tenants(store)


def two_tenants(store: Store) -> MemoryService:
    """Two tenants; in acme two scopes, items active, rewritten, quarantined, erased and
    expired, some sharing terms (nine items in all)."""
    clock = FakeClock()
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=clock)
    for number in range(4):
        service.write(ACME, body(id=f"m{number}", content=f"Email habit {number} email."))
    service.write(ACME, body(id="m0", content="Calls on Fridays.", expected_version=1))
    service.write(ACME, body(id="s1", agent_id="sales-bot", content="Email prices."))
    untrusted = principal("acme", "agent", trust=Trust.UNTRUSTED)
    service.write(untrusted, body(id="q1", content="Email rumour.", trust="untrusted"))
    service.write(ACME, body(id="gone", content="Erase this email."))
    service.erase(DPO, "gone")
    service.write(ACME, body(id="short", content="Short email.", ttl_seconds=60))
    clock.advance(seconds=61)
    assert service.expire_due() == 1
    service.write(GLOBEX, body(id="g1", content="Email habit."))
    return service


def run(store: Store, *statements: str) -> None:
    """Run ``statements`` on the store's tables, behind the service's back."""
    database = getattr(store, "database")  # noqa: B009 - both SQL stores have one
    with database.write_transaction() as conn:
        for statement in statements:
            conn.execute(statement)


def projection(store: Store) -> dict[str, list[Any]]:
    """Every row of every projection table, each row id replaced by the (tenant, memory
    id) of its item and each scope id by its (tenant, agent, purpose): two projections
    holding the same rows compare equal whatever their row ids."""
    item = "m.tenant_id, m.id"
    scope = "s.tenant_id, s.agent_id, s.purpose"
    joins = "LEFT JOIN memories AS m ON m.rowid = r.item LEFT JOIN scopes AS s ON s.id = r.scope"
    statements = {
        "memories": f"SELECT {', '.join(ITEM_COLUMNS)} FROM memories",
        "scopes": f"SELECT {scope}, s.documents, s.total_length FROM scopes AS s",
        "search_docs": (
            f"SELECT {item}, {scope}, r.length, r.confidence, r.updated_at, r.expires_at, "
            f"r.kind, r.terms, r.tfs FROM search_docs AS r {joins}"
        ),
        "postings": f"SELECT {item}, {scope}, r.term, r.impact FROM postings AS r {joins}",
        "search_vectors": f"SELECT {item}, {scope}, r.vector FROM search_vectors AS r {joins}",
    }
    database = getattr(store, "database")  # noqa: B009 - both SQL stores have one
    tables: dict[str, list[Any]] = {}
    with database.write_transaction() as conn:
        for table, statement in statements.items():
            rows = [_plain(row, table) for row in conn.execute(statement).fetchall()]
            tables[table] = sorted(rows, key=repr)
    return tables


def _plain(row: tuple[Any, ...], table: str) -> tuple[Any, ...]:
    """A row with its values as Python values alike on both backends."""
    if table == "search_docs":  # terms and frequencies: packed blobs or two arrays
        terms = document_terms(row[-2], row[-1])
        if terms is None:
            return (*row[:-2], "unreadable", repr(row[-2]), repr(row[-1]))
        return (*row[:-2], sorted(terms.items()))
    return tuple(bytes(value) if isinstance(value, memoryview) else value for value in row)


def ids(service: MemoryService, text: str) -> list[str]:
    return [hit.item.id for hit in service.search(ACME, query(text)).items]


@dataclass(frozen=True)
class Damage:
    name: str
    statements: tuple[str, ...]
    reindex: bool = False  # only a reindex, which opens content, can find it

    def __str__(self) -> str:
        return self.name


def _column_damage(column: str) -> Damage:
    """One column of m1's row changed to another value of its type."""
    changed = {
        "tenant_id": "'globex'",
        "content": "NULL",
        "confidence": "confidence / 2",
        "provenance": "'{}'",
        "supersedes_id": "'m2'",
        "superseded_by": "'m3'",
    }
    integers = {"content_version", "created_at", "updated_at", "expires_at", "version", "tokens"}
    value = changed.get(column, f"{column} + 1" if column in integers else f"{column} || 'x'")
    return Damage(
        f"memories.{column}", (f"UPDATE memories SET {column} = {value} WHERE rowid = {ITEM}",)
    )


DAMAGES = [
    *(_column_damage(column) for column in ITEM_COLUMNS),
    Damage(
        "every row of an item missing",
        (
            f"DELETE FROM postings WHERE item = {ITEM}",
            f"DELETE FROM search_docs WHERE item = {ITEM}",
            f"DELETE FROM memories WHERE rowid = {ITEM}",
        ),
    ),
    Damage(
        "every row of a tenant missing",  # loaded whole, as by an import; its scopes stay
        (
            "DELETE FROM postings WHERE scope IN (SELECT id FROM scopes WHERE tenant_id = 'acme')",
            "DELETE FROM search_docs WHERE item IN "
            "(SELECT rowid FROM memories WHERE tenant_id = 'acme')",
            "DELETE FROM memories WHERE tenant_id = 'acme'",
        ),
    ),
    Damage(
        "an item of no event",
        (
            f"INSERT INTO memories ({', '.join(ITEM_COLUMNS)}) SELECT tenant_id, 'ghost', "
            + ", ".join(ITEM_COLUMNS[2:])
            + f" FROM memories WHERE rowid = {ITEM}",
        ),
    ),
    Damage("a document missing", (f"DELETE FROM search_docs WHERE item = {ITEM}",)),
    Damage(
        "a document of an item not searchable",
        (
            f"INSERT INTO search_docs ({DOCUMENT}) SELECT (SELECT rowid FROM memories "
            f"WHERE id = 'q1'), {DOCUMENT[6:]} FROM search_docs WHERE item = {ITEM}",
        ),
    ),
    Damage("search_docs.scope", (f"UPDATE search_docs SET scope = {SALES} WHERE item = {ITEM}",)),
    Damage(
        "search_docs.confidence",
        (f"UPDATE search_docs SET confidence = 0.25 WHERE item = {ITEM}",),
    ),
    Damage(
        "search_docs.updated_at",
        (f"UPDATE search_docs SET updated_at = updated_at + 1 WHERE item = {ITEM}",),
    ),
    Damage(
        "search_docs.expires_at",
        (f"UPDATE search_docs SET expires_at = expires_at - 1 WHERE item = {ITEM}",),
    ),
    Damage("search_docs.kind", (f"UPDATE search_docs SET kind = 'event' WHERE item = {ITEM}",)),
    Damage(
        "search_docs.length",
        (f"UPDATE search_docs SET length = length + 1 WHERE item = {ITEM}",),
        reindex=True,
    ),
    Damage(
        "search_docs.terms",
        (
            f"UPDATE search_docs SET terms = (SELECT terms FROM search_docs WHERE item = {OTHER}), "
            f"tfs = (SELECT tfs FROM search_docs WHERE item = {OTHER}) WHERE item = {ITEM}",
        ),
        reindex=True,
    ),
    Damage(
        "a posting missing",
        (
            "DELETE FROM postings WHERE (scope, term, impact, item) IN "
            f"(SELECT scope, term, impact, item FROM postings WHERE item = {ITEM} LIMIT 1)",
        ),
    ),
    Damage(
        "a posting of a term the item lacks",
        (
            "INSERT INTO postings SELECT scope, 12345, impact, item FROM postings "
            f"WHERE item = {ITEM} LIMIT 1",
        ),
    ),
    Damage(
        "the impact of a posting",
        (
            "UPDATE postings SET impact = impact + 65536 WHERE (scope, term, impact, item) IN "
            f"(SELECT scope, term, impact, item FROM postings WHERE item = {ITEM} LIMIT 1)",
        ),
    ),
    Damage(
        # (impact - 1) << 31 | (item + 2**31) == impact << 31 | item: a check that packed
        # the two into one integer without bounding the item would see no difference
        "a posting's impact and item both altered, to the same packed value",
        (
            "UPDATE postings SET impact = impact - 1, item = item + 2147483648 "
            "WHERE (scope, term, impact, item) IN "
            f"(SELECT scope, term, impact, item FROM postings WHERE item = {ITEM} LIMIT 1)",
        ),
    ),
    Damage(
        "a posting moved to another scope of the tenant",
        (
            f"UPDATE postings SET scope = {SALES} WHERE (scope, term, impact, item) IN "
            f"(SELECT scope, term, impact, item FROM postings WHERE item = {ITEM} LIMIT 1)",
        ),
    ),
    Damage(
        "a posting of another item",
        (
            f"UPDATE postings SET item = {OTHER} WHERE (scope, term, impact, item) IN "
            f"(SELECT scope, term, impact, item FROM postings WHERE item = {ITEM} "
            f"AND term NOT IN (SELECT term FROM postings WHERE item = {OTHER}) LIMIT 1)",
        ),
    ),
    Damage(
        "a document and its postings moved to a scope of another tenant",
        (
            f"UPDATE postings SET scope = {GLOBEX_SCOPE} WHERE item = {ITEM}",
            f"UPDATE search_docs SET scope = {GLOBEX_SCOPE} WHERE item = {ITEM}",
        ),
    ),
    Damage(
        "a posting of an item of no row",
        (
            "INSERT INTO postings SELECT scope, term, impact, 999999 FROM postings "
            f"WHERE item = {ITEM} LIMIT 1",
        ),
    ),
    Damage(
        "a vector of an item not searchable",
        (
            # any bytes: another item's sealed content
            f"INSERT INTO search_vectors (item, scope, vector) SELECT {ITEM}, {SCOPE}, content "
            f"FROM memories WHERE rowid = {OTHER}",
        ),
    ),
    Damage(
        "scopes.documents", (f"UPDATE scopes SET documents = documents + 1 WHERE id = {SCOPE}",)
    ),
    Damage(
        "scopes.total_length",
        (f"UPDATE scopes SET total_length = total_length - 1 WHERE id = {SCOPE}",),
    ),
]


#: Damages that leave a document's terms unreadable (not merely other terms): by name,
#: the statement for each backend (SQLite packs the terms into blobs, PostgreSQL keeps
#: two arrays). m1's document has three terms.
UNREADABLE = {
    "a document's terms not all term ids (a blob cut inside one; a NULL)": {
        "sqlite": f"UPDATE search_docs SET terms = substr(terms, 1, 7) WHERE item = {ITEM}",
        "postgres": f"UPDATE search_docs SET terms[2] = NULL WHERE item = {ITEM}",
    },
    "a document of fewer frequencies than terms": {
        "sqlite": (
            f"UPDATE search_docs SET tfs = substr(tfs, 1, length(tfs) - 2) WHERE item = {ITEM}"
        ),
        "postgres": (
            f"UPDATE search_docs SET tfs = tfs[1:cardinality(tfs) - 1] WHERE item = {ITEM}"
        ),
    },
}


def unreadable(name: str, store: Store) -> Damage:
    """The damage ``name`` of :data:`UNREADABLE`, in the statement for ``store``."""
    backend = "sqlite" if isinstance(store, SQLiteStore) else "postgres"
    return Damage(name, (UNREADABLE[name][backend],))


def postings_of(store: Store, memory_id: str) -> int:
    """How many postings the item ``memory_id`` of acme has."""
    database = getattr(store, "database")  # noqa: B009 - both SQL stores have one
    item = ITEM.replace("'m1'", f"'{memory_id}'")
    with database.write_transaction() as conn:
        (count,) = conn.execute(f"SELECT count(*) FROM postings WHERE item = {item}").fetchone()
    return int(count)


@pytest.fixture(params=["compared", "rewritten whole"])
def tenant_size(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Whether the rebuild compares each tenant's rows with the fold, or (as for a tenant
    of more than ``rebuild_diff.COMPARED_ITEMS`` items) deletes them and loads them whole."""
    if request.param == "rewritten whole":
        monkeypatch.setattr(rebuild_diff, "COMPARED_ITEMS", 0)
    return str(request.param)


@pytest.mark.parametrize("damage", DAMAGES, ids=str)
def test_a_rebuild_repairs_each_damaged_projection_row(
    service: MemoryService, store: Store, damage: Damage, tenant_size: str
) -> None:
    """The damage shows in the projection's rows; after a rebuild (a reindex for what only
    the content can tell) every table holds exactly the rows the writes left, verify is
    clean and searches answer as before, whether the tenants' rows were compared or
    rewritten whole."""
    before, searched = projection(store), ids(service, "email")
    run(store, *damage.statements)
    assert projection(store) != before
    if damage.reindex:
        service.maintenance.reindex()
    else:
        service.maintenance.rebuild()
    assert projection(store) == before
    assert service.verify_replay().differences == []
    assert ids(service, "email") == searched


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_document_whose_terms_cannot_be_read_is_reported_by_verify_and_repaired_by_a_rebuild(
    service: MemoryService,
    store: Store,
    name: str,
    tenant_size: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its index entry counts as absent: verify names the item's document as differing
    (it does not fail), and a rebuild says how many documents it could not read and
    indexes the item again from its content (it does not fail either), leaving every
    table as the writes left it."""
    before, searched = projection(store), ids(service, "email")
    run(store, *unreadable(name, store).statements)
    assert projection(store) != before

    assert service.verify_replay().differences == [
        "acme/m1: search rows differ from its content's: document"
    ]
    with caplog.at_level(logging.WARNING, logger="governed_memory.store"):
        service.maintenance.rebuild()

    unread = [r.getMessage() for r in caplog.records if "could not be read" in r.getMessage()]
    assert unread == [
        "rebuild: a tenant's search documents could not be read (1); "
        "their items are indexed again from their content"
    ]

    assert projection(store) == before
    assert service.verify_replay().differences == []
    assert ids(service, "email") == searched


def test_a_sqlite_document_whose_terms_are_a_number_is_not_read_as_term_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite does not hold a column to its declared type: an integer 24 in ``terms``
    would read, as ``bytes(24)``, as three term ids 0 beside m1's three frequencies. It
    is no blob, so it is unreadable: searches leave m1 out where they read documents
    (and fail nowhere), and the rebuild indexes m1 again from its content."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3")
    service = two_tenants(store)
    before, searched = projection(store), ids(service, "habit")
    large = large_scope_searches(service, monkeypatch)
    run(store, f"UPDATE search_docs SET terms = 24 WHERE item = {ITEM}")

    assert ids(service, "habit") == searched
    assert large_scope_searches(service, monkeypatch) == without(large, "m1")
    assert service.verify_replay().differences == [
        "acme/m1: search rows differ from its content's: document"
    ]
    with caplog.at_level(logging.WARNING, logger="governed_memory.store"):
        service.maintenance.rebuild()

    assert [r.getMessage() for r in caplog.records if "could not be read" in r.getMessage()] == [
        "rebuild: a tenant's search documents could not be read (1); "
        "their items are indexed again from their content"
    ]

    assert projection(store) == before
    assert service.verify_replay().differences == []
    store.close()


def large_scope_searches(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> dict[str, list[str]]:
    """The ids, in rank order, searches for "habit" find with their scope taken as large
    (on SQLite, a large scope's items are scored from their documents): the top few (the
    threshold algorithm), and customer-1's items."""
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_search, "SMALL_SCOPE_POSTINGS", 0)
        top = service.search(ACME, query("habit", limit=3)).items
        subject = service.search(ACME, query("habit", subject_id="customer-1")).items
    return {
        "top": [hit.item.id for hit in top],
        "subject": [hit.item.id for hit in subject],
    }


def without(found: dict[str, list[str]], memory_id: str) -> dict[str, list[str]]:
    """``found`` with ``memory_id`` left out of every answer, the others in their order."""
    return {search: [i for i in ids if i != memory_id] for search, ids in found.items()}


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_document_whose_terms_cannot_be_read_stops_no_write_and_no_erasure(
    service: MemoryService, store: Store, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Searches are still answered: from the intact postings as before, but for SQLite's
    searches of a large scope, which score items from their documents and leave this one
    out until a rebuild. Rewriting the item drops its old postings all the same (every
    posting of the item in its scope, found by a scan); erasing it leaves no posting."""
    searched, large = ids(service, "habit"), large_scope_searches(service, monkeypatch)
    assert {*searched} == {*large["top"]} == {*large["subject"]} == {"m1", "m2", "m3"}
    run(store, *unreadable(name, store).statements)

    assert ids(service, "habit") == searched  # ranked from the postings, which are intact
    # SQLite scores a large scope's items from their documents: m1's is left out
    left = without(large, "m1") if isinstance(store, SQLiteStore) else large
    assert large_scope_searches(service, monkeypatch) == left

    service.write(ACME, body(id="m1", content="Lunch on Tuesdays.", expected_version=1))
    assert "m1" not in ids(service, "habit")
    assert ids(service, "lunch") == ["m1"]
    assert service.verify_replay().differences == []

    run(store, *unreadable(name, store).statements)
    service.erase(DPO, "m1")
    assert postings_of(store, "m1") == 0
    assert ids(service, "lunch") == []
    assert service.verify_replay().differences == []


def test_a_rebuild_of_an_intact_projection_writes_nothing(
    service: MemoryService, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Over a projection that already is the fold of the log, a rebuild only reads: no
    row of any projection table is written (SQLite counts none changed; on PostgreSQL
    every row keeps its physical version), and every document it read was readable (a
    read of the wrong columns would index every item again and write the same rows)."""
    before = versions(store)
    with caplog.at_level(logging.WARNING, logger="governed_memory.store"):
        assert service.maintenance.rebuild() == 9
    assert versions(store) == before
    assert [r for r in caplog.records if "could not be read" in r.getMessage()] == []


def test_a_tenant_too_large_to_compare_is_rewritten_whole_and_its_scopes_move(
    service: MemoryService, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tenant of more items than ``COMPARED_ITEMS`` is not compared (comparing would
    hold all its rows at once): its rows are deleted and loaded again, which every row's
    physical version shows, and the rows are the same ones. On SQLite its scopes'
    generation moves, since its items got new row ids (cached list heads are stale)."""
    before, written = projection(store), versions(store)
    generations, searched = _generations(store), ids(service, "email")
    monkeypatch.setattr(rebuild_diff, "COMPARED_ITEMS", 3)  # acme has 9 items, globex 1
    assert service.maintenance.rebuild() == 9
    assert projection(store) == before
    assert versions(store) != written
    assert service.verify_replay().differences == []
    assert ids(service, "email") == searched
    if isinstance(store, SQLiteStore):
        after = _generations(store)
        assert all(after[key] > generations[key] for key in after if key[0] == "acme")
        assert all(after[key] == generations[key] for key in after if key[0] == "globex")


def _generations(store: Store) -> dict[tuple[str, str, str], int]:
    """SQLite: each scope's generation by (tenant, agent, purpose); PostgreSQL: none."""
    if not isinstance(store, SQLiteStore):
        return {}
    database = getattr(store, "database")  # noqa: B009 - both SQL stores have one
    with database.write_transaction() as conn:
        rows = conn.execute("SELECT tenant_id, agent_id, purpose, generation FROM scopes")
        return {(t, a, p): int(g) for t, a, p, g in rows.fetchall()}


def versions(store: Store) -> object:
    """SQLite: how many rows its writer connection has changed; PostgreSQL: each
    projection row's physical location and creating transaction."""
    database = getattr(store, "database")  # noqa: B009 - both SQL stores have one
    if isinstance(store, SQLiteStore):
        return database.writer.total_changes
    tables = ("memories", "search_docs", "postings", "search_vectors", "scopes")
    with database.connection() as conn:
        return {
            table: sorted(conn.execute(f"SELECT ctid::text, xmin::text FROM {table}").fetchall())
            for table in tables
        }


def test_rows_damaged_between_a_tenants_fold_and_its_swap_are_still_repaired(
    service: MemoryService, store: Store
) -> None:
    """A tenant's rows may be read with its index entries, before its fold, and kept for
    its swap; a row changed meanwhile by another connection (here an item's column and a
    document's, behind the service's back, with no event) is still found and repaired:
    the swap reads the rows again once anything was committed since."""
    before = projection(store)
    original = store.rebuild

    def damaged_first(tenants: Any) -> set[str]:
        run(
            store,
            f"UPDATE memories SET confidence = 0.5 WHERE rowid = {ITEM}",
            f"UPDATE search_docs SET length = length + 1 WHERE item = {OTHER}",
        )
        return original(tenants)

    store.rebuild = damaged_first  # type: ignore[method-assign]
    service.maintenance.rebuild()
    assert projection(store) == before
    assert service.verify_replay().differences == []


def test_a_quiet_sqlite_swap_reads_no_item_or_document_row_under_the_write_lock(
    tmp_path: Path,
) -> None:
    """SQLite: over a store nobody writes to during the rebuild, each tenant's item and
    document rows are read once, in the snapshot its index entries come from, not again
    by its swap under the write lock; and the projection is still the fold's."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3")
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
    for tenant in (ACME, GLOBEX):
        for number in range(3):
            service.write(tenant, body(id=f"m{number}", content=f"Email habit {number}."))
    before, statements = projection(store), []
    store.database.writer.set_trace_callback(statements.append)
    assert service.maintenance.rebuild() == 6
    store.database.writer.set_trace_callback(None)
    reads = [sql.REBUILD_ITEMS.split("?")[0], sql.REBUILD_DOCUMENTS.split("?")[0]]
    assert [s for s in statements if s.startswith(tuple(reads))] == []
    assert projection(store) == before
