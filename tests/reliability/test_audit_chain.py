"""The tamper-evident log (issue 13): each event carries the hash of its tenant's previous
event, and verifying the chain names the first event edited, deleted, inserted or moved.

The stores are tampered with as an intruder with the database would: raw SQL, the
append-only triggers dropped first. Every case runs on SQLite and PostgreSQL (the
in-memory store keeps the same chain and verifies clean).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from governed_memory.chain import GENESIS, next_hash
from governed_memory.core.values import Scope
from governed_memory.crypto import Keyring
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from governed_memory.service.chain_audit import (
    EDITED,
    MISPLACED,
    UNCHAINED,
    chain_heads,
    verify_chain,
)
from governed_memory.store.postgres import PostgresStore
from governed_memory.store.sqlite import SQLiteStore
from tests.conftest import make_store, postgres_dsn
from tests.contract import test_retention as contract_retention
from tests.support.fakes import FakeClock, body, principal
from tests.support.legacy import canonical_event_rows
from tests.support.threads import race

WRITER = principal()
OTHER = principal(tenant="globex")
DPO = principal(name="dpo", scopes={Scope.SUBJECT_FORGET, Scope.MEMORY_READ})

SQL_BACKENDS = ["sqlite", "postgres"]
#: An event forged at position 3 with its chain hashes given (``%s``: each backend's mark).
FORGE = (
    "INSERT INTO events (position, event_id, type, tenant_id, memory_id, subject_id, "
    "version, occurred_at, actor, idempotency_key, schema_version, payload, prev_hash, hash) "
    "VALUES (3, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
#: A copy of event 5 at position 6, without chain hashes.
COPY_UNCHAINED = (
    "INSERT INTO events (position, event_id, type, tenant_id, memory_id, subject_id, "
    "version, occurred_at, actor, idempotency_key, schema_version, payload) "
    "SELECT 6, 'forged', type, tenant_id, memory_id, subject_id, version, occurred_at, "
    "actor, idempotency_key, schema_version, payload FROM events WHERE position = 5"
)


@pytest.fixture(params=SQL_BACKENDS)
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from make_store(request.param, tmp_path)


def tamper(store: Store, *statements: str) -> None:
    """Run raw SQL on the store's database with the append-only triggers out of the way."""
    if isinstance(store, SQLiteStore):
        conn = sqlite3.connect(store.path)
        try:
            for trigger in ("events_refuse_update", "events_refuse_delete"):
                conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
            for statement in statements:
                conn.execute(statement.replace("%s", "?"))
            conn.commit()
        finally:
            conn.close()
        return
    assert isinstance(store, PostgresStore)
    with store.database.connection() as conn, conn.transaction():
        conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
        for statement in statements:
            conn.execute(statement.encode("utf-8"))
        conn.execute("ALTER TABLE events ENABLE TRIGGER USER")


def seeded(store: Store) -> MemoryService:
    """Two tenants, interleaved: acme at positions 1, 2, 4, 5; globex at 3."""
    service = MemoryService(store, Keyring(bytes(range(32))), clock=FakeClock())
    service.write(WRITER, body(id="a", content="Prefers email."))
    service.write(WRITER, body(id="a", content="Prefers phone.", expected_version=1))
    service.write(OTHER, body(id="g", content="Another tenant."))
    service.write(WRITER, body(id="b", content="Lives in Lyon."))
    service.write(WRITER, body(id="c", content="Speaks French."))
    assert [e.event.tenant_id for e in store.events_after(None, 0, 10)] == [
        "acme",
        "acme",
        "globex",
        "acme",
        "acme",
    ]
    return service


def only_break(store: Store) -> tuple[str, int, str]:
    report = verify_chain(store)
    assert len(report.breaks) == 1, report.breaks
    found = report.breaks[0]
    return found.tenant_id, found.position, found.problem


def test_every_backend_chains_each_tenants_events_and_verifies_clean(store: Store) -> None:
    """Each event's prev hash is its tenant's previous event's hash (the first follows
    GENESIS), its hash is computed from its stored columns, and the log verifies clean."""
    seeded(store)
    links = store.chain_links(None, 0, 10)
    previous: dict[str, bytes] = {}
    for link in links:
        assert link.prev_hash == previous.get(link.tenant_id, GENESIS)
        assert link.hash == next_hash(link.prev_hash, link.columns)
        previous[link.tenant_id] = link.hash
    report = verify_chain(store)
    assert (report.ok, report.events, report.tenants) == (True, 5, 2)
    heads = {h.tenant_id: (h.position, h.hash, h.events) for h in chain_heads(store)}
    assert heads == {
        "acme": (5, previous["acme"].hex(), 4),
        "globex": (3, previous["globex"].hex(), 1),
    }


def test_an_edited_event_is_named_by_its_position(sql_store: Store) -> None:
    """Changing one stored column (the actor) breaks the chain at that event."""
    seeded(sql_store)
    tamper(sql_store, "UPDATE events SET actor = 'someone-else' WHERE position = 2")
    assert only_break(sql_store) == ("acme", 2, EDITED)


def test_edited_sealed_content_is_an_edited_event(sql_store: Store) -> None:
    """The payload is hashed as stored, ciphertext included: one changed byte of the
    sealed content shows without any key."""
    seeded(sql_store)
    if isinstance(sql_store, SQLiteStore):  # the canonical form (compact rows: test_sqlite)
        canonical_event_rows(sql_store.path)
    tamper(
        sql_store,
        'UPDATE events SET payload = replace(payload, \'"content":"A\', \'"content":"B\') '
        "WHERE position = 4",
    )
    (row,) = sql_store.chain_links("acme", 2, 1)
    assert '"content":"B' in row.columns[-1]
    assert only_break(sql_store) == ("acme", 4, EDITED)


def test_a_hash_of_another_type_is_reported_not_a_crash(tmp_path: Path) -> None:
    """SQLite keeps any type in any column: a hash edited into text or a number is an
    edited event, and the event after it is out of place, never an error of the tool."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3")
    try:
        seeded(store)
        tamper(store, "UPDATE events SET hash = 'abc' WHERE position = 1")
        assert only_break(store) == ("acme", 1, EDITED)
        tamper(store, "UPDATE events SET hash = 7, prev_hash = 3.5 WHERE position = 1")
        assert only_break(store) == ("acme", 1, MISPLACED)
    finally:
        store.close()


def test_an_event_moved_to_another_tenant_breaks_both_chains(sql_store: Store) -> None:
    """An event moved from acme to globex follows nothing of globex's, and acme's next
    event no longer follows its previous one: both tenants are named."""
    seeded(sql_store)
    tamper(sql_store, "UPDATE events SET tenant_id = 'globex' WHERE position = 4")
    report = verify_chain(sql_store)
    assert [(b.tenant_id, b.position, b.problem) for b in report.breaks] == [
        ("acme", 5, MISPLACED),
        ("globex", 4, MISPLACED),
    ]


def test_a_deleted_event_is_named_by_the_event_after_it(sql_store: Store) -> None:
    """Deleting an event leaves the next one pointing at a hash that is no longer there."""
    seeded(sql_store)
    tamper(sql_store, "DELETE FROM events WHERE position = 2")
    assert only_break(sql_store) == ("acme", 4, MISPLACED)


def test_an_inserted_event_is_found_even_with_its_hashes_computed(sql_store: Store) -> None:
    """An event forged into a gap of the tenant's positions, with a correctly computed
    chain of its own, still breaks the link of the event after it."""
    seeded(sql_store)
    first = sql_store.chain_links("acme", 1, 1)[0]  # position 2
    columns = list(first.columns)
    columns[0] = "forged-event-id"
    forged_hash = next_hash(first.hash or b"", columns)
    tamper(sql_store, "DELETE FROM events WHERE position = 3")
    _run(sql_store, FORGE, (*columns, first.hash, forged_hash))
    assert only_break(sql_store) == ("acme", 4, MISPLACED)


def test_an_event_inserted_without_hashes_is_named_by_its_position(sql_store: Store) -> None:
    """A row written past the store, without chain hashes, is named itself."""
    seeded(sql_store)
    tamper(sql_store, COPY_UNCHAINED)
    assert only_break(sql_store) == ("acme", 6, UNCHAINED)


def test_reordered_events_are_named_by_the_first_moved_position(sql_store: Store) -> None:
    """Swapping two events of a tenant, hashes and all, breaks the chain where the first
    of them now stands."""
    seeded(sql_store)
    tamper(
        sql_store,
        "UPDATE events SET position = 100 WHERE position = 2",
        "UPDATE events SET position = 2 WHERE position = 4",
        "UPDATE events SET position = 4 WHERE position = 100",
    )
    assert only_break(sql_store) == ("acme", 2, MISPLACED)


def test_one_broken_tenant_leaves_the_others_verified(sql_store: Store) -> None:
    """A break is reported per tenant: globex stays clean while acme is broken, and every
    event is still counted."""
    seeded(sql_store)
    tamper(sql_store, "UPDATE events SET occurred_at = occurred_at + 1 WHERE position = 1")
    report = verify_chain(sql_store)
    assert [(b.tenant_id, b.position) for b in report.breaks] == [("acme", 1)]
    assert (report.events, report.tenants) == (5, 2)


def _run(store: Store, statement: str, params: tuple[Any, ...]) -> None:
    """One parameterized statement on the store's database, triggers out of the way."""
    if isinstance(store, SQLiteStore):
        conn = sqlite3.connect(store.path)
        try:
            conn.execute(statement.replace("%s", "?"), params)
            conn.commit()
        finally:
            conn.close()
        return
    assert isinstance(store, PostgresStore)
    dsn = postgres_dsn()
    assert dsn is not None and store.schema is not None
    with psycopg.connect(dsn, options=f"-c search_path={store.schema}") as pg:
        pg.execute(statement.encode("utf-8"), params)


def test_forget_erase_and_retention_leave_the_chain_verifiable(
    store: Store, clock: FakeClock
) -> None:
    """Destroying keys rewrites no event: after an erase, retention and a forget, the
    whole log still verifies clean and the old events keep their hashes."""
    service = MemoryService(
        store, Keyring(bytes(range(32))), clock=clock, retention=contract_retention.POLICY
    )
    contract_retention.seed(service, clock)
    before = {link.position: link.hash for link in store.chain_links(None, 0, 100)}
    service.erase(DPO, "live")
    clock.advance(days=30)
    assert service.apply_retention().destroyed == 4
    service.forget_subject(DPO, "customer-1")
    after = {link.position: link.hash for link in store.chain_links(None, 0, 100)}
    assert len(after) > len(before)
    assert {p: h for p, h in after.items() if p in before} == before
    report = verify_chain(store)
    assert (report.ok, report.events) == (True, len(after))


def test_the_append_only_triggers_still_refuse_changing_a_chained_event(
    sql_store: Store,
) -> None:
    """Migration 0008 lets the store set the chain of an unchained event only: the hashes
    of a chained event, like its columns, its position and (SQLite) its rowid, cannot be
    updated."""
    seeded(sql_store)
    statements = [
        "UPDATE events SET hash = prev_hash WHERE position = 1",
        "UPDATE events SET actor = 'x' WHERE position = 1",
        "UPDATE events SET position = 999999 WHERE position = 2",
        "DELETE FROM events WHERE position = 1",
    ]
    if isinstance(sql_store, SQLiteStore):  # the aliases of SQLite's INTEGER PRIMARY KEY
        statements += [
            "UPDATE events SET rowid = 999999 WHERE position = 2",
            "UPDATE events SET _rowid_ = 999999 WHERE position = 2",
            "UPDATE events SET oid = 999999 WHERE position = 2",
        ]
    for statement in statements:
        with pytest.raises((sqlite3.DatabaseError, psycopg.Error), match="append-only"):
            _run(sql_store, statement, ())


SQLITE_BEFORE_0008 = (  # after canonical_event_rows: every event of the canonical form
    "DROP TRIGGER events_refuse_update",
    "ALTER TABLE events DROP COLUMN prev_hash",
    "ALTER TABLE events DROP COLUMN hash",
    "ALTER TABLE events DROP COLUMN content",
    "ALTER TABLE events DROP COLUMN content_hash",
    "DELETE FROM schema_migrations WHERE version = 12",
    "CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events BEGIN "
    "SELECT RAISE(ABORT, 'the event log is append-only: UPDATE refused'); END",
    "DELETE FROM schema_migrations WHERE version = 8",
)
POSTGRES_BEFORE_0008 = (
    "ALTER TABLE events DROP COLUMN prev_hash, DROP COLUMN hash",
    "CREATE OR REPLACE FUNCTION events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN RAISE EXCEPTION 'the event log is append-only: % refused', TG_OP; END; $$",
    "DELETE FROM schema_migrations WHERE version = 8",
)


def test_a_store_made_before_the_chain_is_chained_by_its_migration(
    sql_store: Store, tmp_path: Path
) -> None:
    """Migration 0008 links the events an older store holds, in its own transaction: the
    reopened store verifies clean, with the very hashes the store computes on commit,
    and the next write extends the chain."""
    service = seeded(sql_store)
    chained = sql_store.chain_links(None, 0, 100)
    if isinstance(sql_store, SQLiteStore):
        sql_store.close()
        canonical_event_rows(sql_store.path)
        conn = sqlite3.connect(sql_store.path)
        for statement in SQLITE_BEFORE_0008:
            conn.execute(statement)
        conn.commit()
        conn.close()
        reopened: Store = SQLiteStore(sql_store.path)
    else:
        assert isinstance(sql_store, PostgresStore)
        with sql_store.database.connection() as conn, conn.transaction():
            for statement in POSTGRES_BEFORE_0008:
                conn.execute(statement.encode("utf-8"))
        dsn = postgres_dsn()
        assert dsn is not None
        reopened = PostgresStore(dsn, schema=sql_store.schema)
    try:
        assert reopened.chain_links(None, 0, 100) == chained
        MemoryService(reopened, service.keyring, clock=FakeClock()).write(
            WRITER, body(id="d", content="After the upgrade.")
        )
        report = verify_chain(reopened)
        assert (report.ok, report.events) == (True, 6)
    finally:
        reopened.close()


def test_concurrent_writers_and_refused_batches_keep_every_chain_whole(store: Store) -> None:
    """Sixteen writers in two tenants, most of them refused (four ids created at once):
    batches committed together link in commit order, and a refused batch, rolled back
    inside a group, leaves no link behind."""
    service = MemoryService(store, Keyring(bytes(range(32))), clock=FakeClock())

    def work(i: int) -> object:
        who = WRITER if i % 2 else OTHER
        return service.write(who, body(id=f"m{i % 4}", content=f"Note {i}."))

    results = race(16, work)
    assert sum(not isinstance(r, Exception) for r in results) == 4
    report = verify_chain(store)
    assert (report.ok, report.events) == (True, 4)


def test_two_postgres_instances_writing_at_once_link_one_chain() -> None:
    """Two stores on one PostgreSQL schema (two instances) append to the same tenants at
    the same time: every event follows its tenant's head as committed, never a stale one."""
    dsn = postgres_dsn()
    assert dsn is not None
    schema = "gmem_test_" + uuid.uuid4().hex[:12]
    first = PostgresStore(dsn, schema=schema)
    second = PostgresStore(dsn, schema=schema)
    try:
        keyring = Keyring(bytes(range(32)))
        services = [MemoryService(s, keyring, clock=FakeClock()) for s in (first, second)]

        def work(i: int) -> object:
            who = WRITER if i % 3 else OTHER
            for n in range(5):
                services[i % 2].write(who, body(id=f"w{i}-{n}", content=f"Note {i} {n}."))
            return None

        assert race(8, work) == [None] * 8
        report = verify_chain(first)
        assert (report.ok, report.events) == (True, 40)
    finally:
        second.close()
        first.drop_schema()
        first.close()
