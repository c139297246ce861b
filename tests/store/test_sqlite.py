"""What the embedded SQLite store promises beyond the contract: files, plans, durability."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import secrets
import sqlite3
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governed_memory.apikeys import create_api_key
from governed_memory.bootstrap import open_service
from governed_memory.codec import canonical_columns, event_columns, stored_columns
from governed_memory.core.events import MemoryWritten
from governed_memory.core.model import RETAINED_STATUSES as RETAINED
from governed_memory.core.model import ItemState
from governed_memory.core.policy import RetentionPolicy
from governed_memory.core.values import Scope, Trust
from governed_memory.crypto import Keyring
from governed_memory.errors import CryptoError, ReadWouldWait, StoreUnavailable, VersionConflict
from governed_memory.records import (
    Batch,
    ItemChange,
)
from governed_memory.results import SearchHit
from governed_memory.service import MemoryService
from governed_memory.service.chain_audit import EDITED, verify_chain
from governed_memory.store.group_commit import Pending
from governed_memory.store.memory import MemoryStore
from governed_memory.store.sqlite import SQLiteStore, database, wal
from governed_memory.store.sqlite.wal import PURGE_DUE
from tests.support.fakes import START, FakeClock, body, principal, query
from tests.support.legacy import canonical_event_rows

WRITER = principal()


def files_of(directory: Path) -> dict[str, bytes]:
    """Every file in the data directory, as bytes."""
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "gmem-data"


@pytest.fixture
def embedded(data_dir: Path) -> Iterator[MemoryService]:
    service = open_service(data_dir=data_dir, clock=FakeClock())
    yield service
    service.store.close()


def test_the_store_opens_with_wal_durable_commits_and_secure_delete(data_dir: Path) -> None:
    """WAL, synchronous=FULL by default, and secure_delete are set on every connection."""
    store = SQLiteStore.in_directory(data_dir)
    conn = store.database.reader()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1
    store.close()


def test_normal_synchronous_is_an_explicit_choice(data_dir: Path) -> None:
    """The durability trade-off is configurable, never silent."""
    store = SQLiteStore.in_directory(data_dir, synchronous="NORMAL")
    assert store.database.reader().execute("PRAGMA synchronous").fetchone()[0] == 1
    store.close()


def test_the_event_log_refuses_update_and_delete(embedded: MemoryService, data_dir: Path) -> None:
    """Triggers make the log append-only at the database level."""
    embedded.write(WRITER, body(id="m1"))
    conn = sqlite3.connect(data_dir / "gmem.sqlite3")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE events SET actor = 'mallory'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM events")
    conn.close()


def test_migrations_are_recorded_and_applied_once(data_dir: Path) -> None:
    """Reopening a store applies nothing twice."""
    first = SQLiteStore.in_directory(data_dir)
    version = first.schema_version()
    first.close()
    second = SQLiteStore.in_directory(data_dir)
    assert second.migrate() == []
    assert second.schema_version() == version >= 2
    second.close()


def test_reopening_the_store_restores_the_state(data_dir: Path) -> None:
    """Everything acknowledged is there after a restart, and replays clean."""
    clock = FakeClock()
    service = open_service(data_dir=data_dir, clock=clock)
    service.write(WRITER, body(id="a"))
    service.write(WRITER, body(id="q", trust="untrusted"))
    service.store.close()

    reopened = open_service(data_dir=data_dir, clock=clock)
    assert reopened.get(WRITER, "a").content == "The customer prefers email over phone calls."
    assert reopened.get(WRITER, "q").status.value == "quarantined"
    assert [h.item.id for h in reopened.search(WRITER, query("email")).items] == ["a"]
    assert reopened.verify_replay().ok
    reopened.store.close()


def test_the_master_key_file_is_private(embedded: MemoryService, data_dir: Path) -> None:
    """The key file is created with mode 0600."""
    mode = stat.S_IMODE(os.stat(data_dir / "master.key").st_mode)
    assert mode == 0o600


def test_content_never_reaches_the_files_in_plaintext(
    embedded: MemoryService, data_dir: Path
) -> None:
    """Content is sealed and terms are hashed, so no file holds a content word."""
    canary = "zqxcanary" + secrets.token_hex(8)
    embedded.write(WRITER, body(id="m1", content=f"Remember {canary} forever."))
    assert [h.item.id for h in embedded.search(WRITER, query(canary)).items] == ["m1"]
    for name, data in files_of(data_dir).items():
        assert canary.encode() not in data, name


def test_after_forget_the_canary_and_the_key_are_gone_from_every_file(
    embedded: MemoryService, data_dir: Path
) -> None:
    """Forget destroys the subject key and purges the WAL: nothing can decrypt the log."""
    canary = "zqxcanary" + secrets.token_hex(8)
    embedded.write(WRITER, body(id="m1", content=f"Remember {canary} forever."))
    key = embedded.store.subject_key("acme", "customer-1")
    assert key is not None

    embedded.forget_subject(WRITER, "customer-1")

    files = files_of(data_dir)
    assert files.get("gmem.sqlite3-wal", b"") == b""  # checkpointed and truncated
    for name, data in files.items():
        assert canary.encode() not in data, name
        assert key.wrapped not in data, name
        assert key.key_id not in data or name == "gmem.sqlite3", name
    assert embedded.store.subject_key("acme", "customer-1") is None
    assert embedded.get(WRITER, "m1").content is None


def _fill(service: MemoryService, tenants: int, per_tenant: int) -> None:
    for t in range(tenants):
        writer = principal(f"tenant-{t}")
        for n in range(per_tenant):
            service.write(writer, body(id=f"m{n}", content=f"email note {n} of tenant {t}"))


def _traced(
    service: MemoryService, tenant: str, text: str = "email note tenant", **search: object
) -> tuple[list[SearchHit], list[str]]:
    """One service search's hits, and every SQL statement it ran on this thread's
    connection."""
    store = service.store
    assert isinstance(store, SQLiteStore)
    statements: list[str] = []
    conn = store.database.reader()
    conn.set_trace_callback(statements.append)
    try:
        hits = service.search(principal(tenant), query(text, **search)).items
    finally:
        conn.set_trace_callback(None)
    return hits, statements


def _traced_search(service: MemoryService, tenant: str, **search: object) -> list[str]:
    """The reads (``SELECT``) one service search runs on this thread's connection."""
    _, statements = _traced(service, tenant, **search)
    return [sql for sql in statements if sql.lstrip().upper().startswith("SELECT")]


@pytest.mark.parametrize(
    "search", [{}, {"subject_id": "customer-1"}, {"kinds": ["fact"]}, {"limit": 1}], ids=str
)
def test_a_scoped_search_uses_indexes_and_never_scans_a_table(
    tmp_path: Path, search: dict[str, object]
) -> None:
    """Every statement of a search is an index search inside the scope: no table scan."""
    service = open_service(data_dir=tmp_path, synchronous="OFF")
    _fill(service, tenants=30, per_tenant=40)
    store = service.store
    assert isinstance(store, SQLiteStore)
    store.database.writer.execute("ANALYZE")

    statements = _traced_search(service, "tenant-7", **search)

    assert statements
    for sql in statements:
        plan = store.explain(sql, [])
        assert plan, sql
        assert not any(step.startswith("SCAN") for step in plan), (sql, plan)
        # reading "every item of the tenant" would be a scan in disguise
        assert not any(step.endswith("(tenant_id=?)") for step in plan), (sql, plan)
    store.close()


def test_a_small_scopes_documents_are_read_through_the_scopes_own_index(
    tmp_path: Path,
) -> None:
    """The postings of a small scope are read with their documents' confidence, last
    change, expiry and kind from ``search_docs_by_scope`` (a scope's entries together,
    covering the read), not from the table by each item's rowid (a page per posting)."""
    service = open_service(data_dir=tmp_path, synchronous="OFF")
    _fill(service, tenants=3, per_tenant=40)
    store = service.store
    assert isinstance(store, SQLiteStore)

    _, traced = _traced(service, "tenant-1")
    (few,) = [sql for sql in traced if "FROM postings" in sql]

    plan = store.explain(few, [])
    documents = [step for step in plan if step.startswith("SEARCH d ")]
    assert documents == ["SEARCH d USING COVERING INDEX search_docs_by_scope (scope=? AND item=?)"]
    store.close()


def test_a_store_made_before_the_scope_index_gets_it_when_opened(tmp_path: Path) -> None:
    """Migration 13 adds the index to a store that had none, and its searches return what
    they returned before."""
    clock = FakeClock()
    service = open_service(data_dir=tmp_path, synchronous="OFF", clock=clock)
    _fill(service, tenants=2, per_tenant=30)
    before = service.search(principal("tenant-1"), query("email note tenant")).items
    service.close()
    with sqlite3.connect(tmp_path / "gmem.sqlite3") as conn:
        conn.execute("DROP INDEX search_docs_by_scope")
        conn.execute("DELETE FROM schema_migrations WHERE version = 13")
    conn.close()

    service = open_service(data_dir=tmp_path, synchronous="OFF", clock=clock)
    after = service.search(principal("tenant-1"), query("email note tenant")).items

    assert [(h.item.id, h.score) for h in after] == [(h.item.id, h.score) for h in before]
    assert len(before) == 10
    store = service.store
    assert isinstance(store, SQLiteStore)
    indexes = store.database.query(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'search_docs'"
    )
    assert ("search_docs_by_scope",) in [tuple(row) for row in indexes]
    service.close()


@pytest.mark.parametrize(
    ("search", "with_matches"),
    [({}, True), ({"subject_id": "customer-1"}, True), ({"limit": 1}, False)],
    ids=str,
)
def test_a_search_reads_its_candidates_rows_and_keys_in_one_statement(
    tmp_path: Path, search: dict[str, object], with_matches: bool
) -> None:
    """The hits' rows, their subjects' keys and their own keys come with the matches, in
    one read of the search's snapshot (the one that checks the candidates' filters), when
    it has at most four times as many candidates as it wants; with more (forty matches for
    one hit), the chosen hit's row and keys are read after ranking, in the same
    snapshot."""
    service = open_service(data_dir=tmp_path, synchronous="OFF")
    _fill(service, tenants=3, per_tenant=40)
    store = service.store
    assert isinstance(store, SQLiteStore)
    hits, traced = _traced(service, "tenant-1", **search)

    reads = [sql for sql in traced if sql.lstrip().upper().startswith("SELECT")]
    found = [sql for sql in reads if "LEFT JOIN subject_keys" in sql]
    after = [
        sql
        for sql in reads
        if "FROM memories AS m WHERE tenant_id" in sql  # get_many
        or "FROM subject_keys WHERE" in sql
        or "FROM item_keys WHERE" in sql
    ]
    assert (len(found), len(after)) == ((1, 0) if with_matches else (0, 3))
    # the statement that checks the candidates' filters, by rowid; none by id afterwards
    assert all("WHERE m.rowid IN" in sql for sql in found)
    assert not [sql for sql in reads if "m.id IN (" in sql]
    assert [sql for sql in traced if sql.strip().upper() == "BEGIN"] == ["BEGIN"]
    assert hits and all(hit.item.content.endswith("of tenant 1") for hit in hits)
    store.close()


def test_candidates_left_out_of_the_filters_read_have_their_rows_read_with_the_matches(
    tmp_path: Path,
) -> None:
    """A subject's search of a small scope checks every match (45, more than four times
    the 10 it wants, so their rows are not read then); the five of the subject that pass
    are few enough for their rows and keys to be read with the matches, by id, in the
    search's snapshot, and nothing is read after ranking."""
    service = open_service(data_dir=tmp_path, synchronous="OFF")
    _fill(service, tenants=2, per_tenant=40)
    writer = principal("tenant-1")
    for n in range(5):
        service.write(writer, body(id=f"x{n}", subject_id="customer-9", content=f"email note {n}"))
    store = service.store
    assert isinstance(store, SQLiteStore)
    hits, traced = _traced(service, "tenant-1", "email note", subject_id="customer-9")

    reads = [sql for sql in traced if sql.lstrip().upper().startswith("SELECT")]
    with_filters = [sql for sql in reads if "WHERE m.rowid IN" in sql]
    by_id = [sql for sql in reads if "m.id IN (" in sql]
    assert len(with_filters) == 1 and "LEFT JOIN subject_keys" not in with_filters[0]
    assert len(by_id) == 1 and "LEFT JOIN subject_keys" in by_id[0]
    assert not [sql for sql in reads if "FROM memories AS m WHERE tenant_id" in sql]
    assert sorted(hit.item.id for hit in hits) == [f"x{n}" for n in range(5)]
    store.close()


def _search_steps(service: MemoryService) -> int:
    """SQLite virtual-machine steps spent by one scoped search of tenant-0's scope."""
    store = service.store
    assert isinstance(store, SQLiteStore)
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn = store.database.reader()
    conn.set_progress_handler(count, 1)
    try:
        found = service.search(principal("tenant-0"), query("email note tenant", limit=100))
    finally:
        conn.set_progress_handler(None, 1)
    assert len(found.items) == 10
    return steps


def test_a_scoped_search_costs_the_same_however_many_other_tenants_exist(
    tmp_path: Path,
) -> None:
    """Growing other tenants' data 20-fold does not change the work of a scoped search."""
    small = open_service(data_dir=tmp_path / "small", synchronous="OFF")
    _fill(small, tenants=5, per_tenant=10)
    large = open_service(data_dir=tmp_path / "large", synchronous="OFF")
    _fill(large, tenants=100, per_tenant=10)

    assert _search_steps(small) == _search_steps(large)
    small.store.close()
    large.store.close()


def three_new_items() -> tuple[list[ItemChange], ItemState]:
    """Three new items in three scopes (their changes), and an existing item's state."""
    source = MemoryService(MemoryStore(), Keyring(secrets.token_bytes(32)), clock=FakeClock())
    anchor = source.write(WRITER, body(id="anchor")).item
    source.write(WRITER, body(id="x1", agent_id="bot-x"))
    x1 = source.store.get("acme", "x1")
    assert x1 is not None
    index = source.index_doc("acme", "email")
    items = [dataclasses.replace(x1, id=f"{n}1", agent_id=f"bot-{n}") for n in "xyz"]
    return [ItemChange(item, 0, index) for item in items], dataclasses.replace(x1, id=anchor.id)


def test_a_rolled_back_batch_leaves_no_scope_behind(tmp_path: Path) -> None:
    """A batch that fails inside a group forgets the scope it created (its id is reused)."""
    (x1, y1, _), stale = three_new_items()
    store = SQLiteStore(tmp_path / "gmem.sqlite3")
    # The first batch creates scope (acme, bot-x, support), then fails on a stale version.
    doomed = Batch("acme", [], [x1, ItemChange(stale, 7, None)])
    group = [Pending(doomed), Pending(Batch("acme", [], [y1]))]

    store._batches.commit_group(group)
    store.commit(Batch("acme", [], [x1]))

    assert isinstance(group[0].error, VersionConflict)
    assert group[1].error is None
    scopes = store.database.query("SELECT tenant_id, agent_id, purpose, documents FROM scopes")
    assert sorted(scopes) == [("acme", "bot-x", "support", 1), ("acme", "bot-y", "support", 1)]
    store.close()


def traced(store: SQLiteStore) -> list[str]:
    """The savepoint and rollback statements the store's writer runs from now on."""
    seen: list[str] = []
    store.database.writer.set_trace_callback(
        lambda text: (
            seen.append(text) if text.split()[0] in ("SAVEPOINT", "RELEASE", "ROLLBACK") else None
        )
    )
    return seen


def one_per_scope(store: SQLiteStore) -> bool:
    scopes = store.database.query("SELECT agent_id, documents FROM scopes ORDER BY agent_id")
    return scopes == [("bot-x", 1), ("bot-y", 1), ("bot-z", 1)]


def test_a_group_is_applied_without_a_savepoint_a_batch(tmp_path: Path) -> None:
    changes, _ = three_new_items()
    store = SQLiteStore(tmp_path / "gmem.sqlite3")
    statements = traced(store)
    group = [Pending(Batch("acme", [], [change])) for change in changes]

    store._batches.commit_group(group)

    assert [p.error for p in group] == [None, None, None]
    assert statements == []
    assert one_per_scope(store)
    store.close()


def test_a_group_with_a_failing_batch_is_applied_again_batch_by_batch(tmp_path: Path) -> None:
    """When one batch of a group fails, the transaction is rolled back and the group
    applied again, each batch in a savepoint: the others stand once (each scope's
    documents counted once), the failed one alone fails."""
    (x1, y1, _), stale = three_new_items()
    store = SQLiteStore(tmp_path / "gmem.sqlite3")
    statements = traced(store)
    group = [
        Pending(Batch("acme", [], [x1])),
        Pending(Batch("acme", [], [ItemChange(stale, 3, None)])),  # no such version
        Pending(Batch("acme", [], [y1])),
    ]

    store._batches.commit_group(group)

    assert [type(p.error) for p in group] == [type(None), VersionConflict, type(None)]
    assert statements[0] == "ROLLBACK"
    assert statements.count("SAVEPOINT batch") == 3
    scopes = store.database.query("SELECT agent_id, documents FROM scopes ORDER BY agent_id")
    assert scopes == [("bot-x", 1), ("bot-y", 1)]
    assert sorted(store.database.query("SELECT id FROM memories")) == [("x1",), ("y1",)]
    store.close()


def test_a_group_that_sqlite_rolled_back_itself_is_begun_again_batch_by_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error that makes SQLite roll back the whole transaction (an interrupt, an I/O
    error) in the group's first pass: the transaction is begun again and every batch
    applied once, not refused for want of a transaction."""
    changes, _ = three_new_items()
    store = SQLiteStore(tmp_path / "gmem.sqlite3")
    applied = 0
    original = store._batches._apply

    def apply(conn: sqlite3.Connection, batch: Batch, scopes: Any) -> list[Any]:
        nonlocal applied
        applied += 1
        if applied != 2:
            return original(conn, batch, scopes)
        conn.set_progress_handler(lambda: 1, 1)  # SQLite interrupts this batch's statement
        try:
            return original(conn, batch, scopes)
        finally:
            conn.set_progress_handler(None, 1)

    monkeypatch.setattr(store._batches, "_apply", apply)
    group = [Pending(Batch("acme", [], [change])) for change in changes]

    store._batches.commit_group(group)

    assert [p.error for p in group] == [None, None, None]
    assert applied == 2 + 3  # two in the first pass, then each batch once
    assert one_per_scope(store)
    store.close()


def test_a_lost_or_swapped_master_key_stops_the_start(data_dir: Path) -> None:
    """A store whose keys were wrapped by another master key refuses to open."""
    import base64

    from governed_memory.errors import ValidationError

    first = open_service(data_dir=data_dir)
    first.write(WRITER, body(id="m1"))
    first.store.close()
    (data_dir / "master.key").unlink()
    with pytest.raises(ValidationError, match="missing"):
        open_service(data_dir=data_dir)
    assert not (data_dir / "master.key").exists()
    other = base64.b64encode(secrets.token_bytes(32)).decode()
    with pytest.raises(ValidationError, match="was created with another master key"):
        open_service(data_dir=data_dir, master_key=other)


def test_a_forget_during_an_open_reader_purges_the_wal_once_it_ends(
    embedded: MemoryService, data_dir: Path
) -> None:
    """A reader pinning the WAL delays the purge, never blocks the writer, never skips it."""
    embedded.write(WRITER, body(id="m1"))
    store = embedded.store
    assert isinstance(store, SQLiteStore)
    key = store.subject_key("acme", "customer-1")
    assert key is not None
    with store.snapshot():
        embedded.forget_subject(WRITER, "customer-1")  # returns at once
    assert store.database.checkpoint_due
    embedded.write(WRITER, body(id="m2", subject_id="customer-2"))
    assert not store.database.checkpoint_due
    for name, data in files_of(data_dir).items():
        assert key.wrapped not in data, name


def test_a_forget_records_its_purge_in_its_own_transaction(
    embedded: MemoryService, data_dir: Path
) -> None:
    """The forget's commit holds the record of its purge (one transaction: no crash parts
    them); the purge itself empties the WAL file."""
    embedded.write(WRITER, body(id="m1"))
    store = embedded.store
    assert isinstance(store, SQLiteStore)
    with store.snapshot():  # a reader keeps the purge from finishing
        embedded.forget_subject(WRITER, "customer-1")
    assert store.meta(PURGE_DUE) is not None
    assert store.database.checkpoint_due
    assert store.checkpoint()
    assert (data_dir / "gmem.sqlite3-wal").stat().st_size == 0


def test_a_store_opened_with_a_purge_recorded_purges_before_anything_else(
    data_dir: Path,
) -> None:
    """A purge left recorded (a crash, a full disk) is done when the store opens: what the
    WAL held is in the database file only, and the record is gone, before the first read."""
    service = open_service(data_dir=data_dir)
    service.write(WRITER, body(id="m1"))
    store = service.store
    assert isinstance(store, SQLiteStore)
    key = store.subject_key("acme", "customer-1")
    assert key is not None
    store.replace_meta(PURGE_DUE, "due")
    wal = data_dir / "gmem.sqlite3-wal"
    assert key.wrapped in wal.read_bytes()
    reopened = SQLiteStore(store.path)
    try:
        assert key.wrapped not in wal.read_bytes()
        assert key.wrapped in (data_dir / "gmem.sqlite3").read_bytes()
        assert reopened.meta(PURGE_DUE) is None
        assert not reopened.database.checkpoint_due
    finally:
        reopened.close()
        store.close()


def test_a_checkpoint_that_fails_leaves_the_purge_due_and_never_raises(
    embedded: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk error while copying the WAL (the forget has committed) is not the forget's
    failure: the checkpoint answers False and the purge stays due, recorded."""
    embedded.write(WRITER, body(id="m1"))
    store = embedded.store
    assert isinstance(store, SQLiteStore)

    def full(conn: sqlite3.Connection, path: Path, attempts: int) -> bool:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(wal, "truncate", full)
    assert embedded.forget_subject(WRITER, "customer-1").affected == 1
    assert store.database.checkpoint_due
    assert store.meta(PURGE_DUE) is not None
    monkeypatch.undo()
    assert store.checkpoint()


def test_a_purge_left_due_is_tried_again_without_a_commit(
    embedded: MemoryService, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the reader that pinned the WAL ends, the purge is done a few seconds later
    even if nothing is written meanwhile."""
    monkeypatch.setattr(database, "PURGE_RETRY_SECONDS", 0.05)
    embedded.write(WRITER, body(id="m1"))
    store = embedded.store
    assert isinstance(store, SQLiteStore)
    key = store.subject_key("acme", "customer-1")
    assert key is not None
    with store.snapshot():
        embedded.forget_subject(WRITER, "customer-1")
        time.sleep(0.2)  # retries meet the reader and are left due
        assert store.database.checkpoint_due
    deadline = time.monotonic() + 10
    while store.database.checkpoint_due and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not store.database.checkpoint_due
    for name, data in files_of(data_dir).items():
        assert key.wrapped not in data, name


def test_a_retention_sweep_under_an_open_reader_tries_each_purge_once(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a reader pins the WAL, the first destroyed key waits for its checkpoint as a
    forget does, the next ones try once (a sweep must not stall writers per item); once
    the reader ends, the next commit purges them all."""
    clock = FakeClock()
    retention = RetentionPolicy.from_seconds(dict.fromkeys(RETAINED, 0))
    service = open_service(data_dir=data_dir, clock=clock, retention=retention)
    store = service.store
    assert isinstance(store, SQLiteStore)
    try:
        for number in range(4):
            service.write(WRITER, body(id=f"m{number}", ttl_seconds=60))
        wrapped = [key.wrapped for key in store.item_keys()]
        clock.advance(seconds=61)
        service.expire_due()
        tries: list[int] = []
        checkpoint = store.database.checkpoint

        def counted(attempts: int = 50) -> bool:
            tries.append(attempts)
            return checkpoint(attempts)

        monkeypatch.setattr(store.database, "checkpoint", counted)
        with store.snapshot():
            assert service.apply_retention().destroyed == 4
        assert tries == [50, 1, 1, 1]
        assert store.database.checkpoint_due
        service.write(WRITER, body(id="after", subject_id="customer-2"))
        assert not store.database.checkpoint_due
        for name, data in files_of(data_dir).items():
            assert not [w for w in wrapped if w in data], name
    finally:
        store.close()


def test_a_read_that_must_not_wait_is_refused_while_the_database_is_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WAL reader can still meet SQLITE_BUSY (recovery by another process, an outside
    connection in exclusive mode). A lookup asked not to wait — the HTTP edge's, on its
    event loop — is then refused at once: it reads on a connection of its own whose busy
    timeout is 0, while the thread's reader keeps its timeout for the reads that wait."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3", busy_timeout_ms=5_000)
    try:
        assert store.api_key("k1", wait=False) is None  # free: answered at once
        timeout = "PRAGMA busy_timeout"
        assert store.database.prompt_reader().execute(timeout).fetchone() == (0,)
        assert store.database.reader().execute(timeout).fetchone() == (5_000,)

        class BusyReader:
            """The reader that must not wait, as it behaves while another process holds
            the file."""

            def execute(self, sql: str, params: object = ()) -> sqlite3.Cursor:
                busy = sqlite3.OperationalError("database is locked")
                busy.sqlite_errorcode = sqlite3.SQLITE_BUSY
                raise busy

        monkeypatch.setattr(store.database, "prompt_reader", BusyReader)
        with pytest.raises(ReadWouldWait):
            store.api_key("k1", wait=False)
        monkeypatch.undo()
        assert store.api_key("k1", wait=False) is None
    finally:
        store.close()


def test_a_read_that_must_not_wait_inside_a_snapshot_reads_the_snapshot(
    tmp_path: Path,
) -> None:
    """Inside this thread's snapshot, a lookup asked not to wait sees what the snapshot
    sees (not a key added since), like every other read of the thread."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3", busy_timeout_ms=5_000)
    try:
        record, _ = create_api_key(
            "acme", None, frozenset({Scope.MEMORY_READ}), Trust.UNTRUSTED, START
        )
        with store.snapshot():
            store.add_api_key(record)  # committed by the writer, after the snapshot began
            assert store.api_key(record.key_id, wait=False) is None
        assert store.api_key(record.key_id, wait=False) == record
    finally:
        store.close()


# -- the compact form of the log (migration 12) ---------------------------------------------


def _raw_events(data_dir: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(data_dir / "gmem.sqlite3")
    try:
        return conn.execute(
            "SELECT type, subject_id, payload, content, content_hash FROM events ORDER BY position"
        ).fetchall()
    finally:
        conn.close()


def _history(service: MemoryService) -> None:
    """Every kind of event: writes, a rewrite, a quarantined item rejected, a forget."""
    service.write(WRITER, body(id="a", provenance={"source": "crm", "ref": "tïcket-1"}))
    service.write(WRITER, body(id="a", content="Prefers phone.", expected_version=1))
    service.write(WRITER, body(id="b", subject_id="customer-2", confidence=0.3))
    service.write(WRITER, body(id="q", trust="untrusted", content="Maybe a fax."))
    service.reject(principal(name="reviewer"), "q", 1, reason="unverified")
    service.forget_subject(WRITER, "customer-2")


def test_a_written_event_is_stored_compact_and_hashed_in_its_canonical_form(
    embedded: MemoryService, data_dir: Path
) -> None:
    """A memory.written row holds its sealed content as the item's blob, its content hash
    as 32 bytes and no key names, the subject once; the chain digests the canonical
    columns (those an export holds), so the log verifies as before."""
    embedded.write(WRITER, body(id="a"))
    [(kind, subject, payload, content, content_hash)] = _raw_events(data_dir)
    stored = embedded.store.get("acme", "a")
    assert stored is not None
    assert (kind, subject) == ("memory.written", "customer-1")
    assert content == stored.content and content_hash == bytes.fromhex(stored.content_hash)
    assert payload.startswith("[") and "customer-1" not in payload and "content" not in payload
    [link] = embedded.store.chain_links(None, 0, 10)
    [event] = embedded.store.events_after(None, 0, 10)
    assert link.columns == event_columns(event.event)
    assert json.loads(link.columns[-1])["content"] == base64.b64encode(content).decode()
    assert verify_chain(embedded.store).ok and embedded.verify_replay().ok


def test_events_stored_before_the_compact_form_read_and_verify_alike(data_dir: Path) -> None:
    """A store whose log was written in the canonical form (before migration 12) reads
    back the same events and chain links, verifies and replays clean, and goes on in the
    compact form; an import of its export is the same log."""
    service = open_service(data_dir=data_dir, clock=FakeClock())
    _history(service)
    events = service.store.events_after(None, 0, 100)
    links = service.store.chain_links(None, 0, 100)
    service.store.close()
    assert canonical_event_rows(data_dir / "gmem.sqlite3") == 4  # the written events

    reopened = open_service(data_dir=data_dir, clock=FakeClock())
    try:
        assert all(row[3] is None for row in _raw_events(data_dir))
        assert reopened.store.events_after(None, 0, 100) == events
        assert reopened.store.chain_links(None, 0, 100) == links
        reopened.write(WRITER, body(id="c", content="After the upgrade."))
        assert _raw_events(data_dir)[-1][3] is not None
        report = verify_chain(reopened.store)
        assert (report.ok, report.events) == (True, len(events) + 1)
        assert reopened.verify_replay().ok
        assert reopened.get(WRITER, "a").content == "Prefers phone."
    finally:
        reopened.store.close()


def test_a_content_hash_that_is_not_hex_is_kept_as_written(tmp_path: Path) -> None:
    """Only the hex of a SHA-256 is stored as 32 bytes: an imported event's other content
    hash comes back as the same text, and hashes the same."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3")
    service = MemoryService(store, Keyring(bytes(range(32))), clock=FakeClock())
    try:
        service.write(WRITER, body(id="a"))
        [original] = store.events_after(None, 0, 1)
        odd = dataclasses.replace(original.event, content_hash="SHA-256:ABC")
        assert isinstance(odd, MemoryWritten)
        columns, stored = stored_columns(odd)
        assert stored[-1] == "SHA-256:ABC"
        assert canonical_columns(stored) == columns
        upper = dataclasses.replace(odd, content_hash=original.event.content_hash.upper())
        columns, stored = stored_columns(upper)
        assert stored[-1] == original.event.content_hash.upper()
        assert canonical_columns(stored) == columns
    finally:
        store.close()


def test_an_edited_compact_row_breaks_the_chain(embedded: MemoryService, data_dir: Path) -> None:
    """One changed byte of the sealed content, of the content hash or of the compact
    payload shows as an edited event, without any key; a value no writer stores there is
    reported the same way, not a failure of the tool."""
    embedded.write(WRITER, body(id="a"))
    embedded.write(WRITER, body(id="b"))
    edits = (
        "UPDATE events SET content = zeroblob(length(content)) WHERE position = 1",
        "UPDATE events SET content_hash = zeroblob(32) WHERE position = 1",
        "UPDATE events SET payload = replace(payload, '0.9', '0.8') WHERE position = 1",
        "UPDATE events SET subject_id = 'customer-2' WHERE position = 1",
        "UPDATE events SET payload = '{}', content_hash = 7 WHERE position = 1",
        "UPDATE events SET content = 'text' WHERE position = 1",
    )
    embedded.store.close()
    path = data_dir / "gmem.sqlite3"
    before = path.read_bytes()
    for edit in edits:
        conn = sqlite3.connect(path)
        conn.execute("DROP TRIGGER events_refuse_update")
        assert conn.execute(edit).rowcount == 1
        conn.commit()
        conn.close()
        store = SQLiteStore(path)
        try:
            report = verify_chain(store)
            assert [(b.position, b.problem) for b in report.breaks] == [(1, EDITED)], edit
        finally:
            store.close()
        path.write_bytes(before)


def _item_contents(data_dir: Path) -> dict[str, bytes | None]:
    conn = sqlite3.connect(data_dir / "gmem.sqlite3")
    try:
        return dict(conn.execute("SELECT id, content FROM memories ORDER BY id").fetchall())
    finally:
        conn.close()


def test_an_item_takes_its_content_from_its_compact_event_and_erasure_still_holds(
    embedded: MemoryService, data_dir: Path
) -> None:
    """An item's row holds the empty blob in place of the content its compact event
    holds, through every change that keeps that content; reads, search and a rebuild
    give the same items; forgetting the subject empties the row and its key is gone."""
    reviewer = principal(name="reviewer")
    embedded.write(WRITER, body(id="a"))
    embedded.write(WRITER, body(id="a", content="Prefers phone calls.", expected_version=1))
    embedded.write(WRITER, body(id="q", trust="untrusted", content="Prefers fax."))
    embedded.promote(reviewer, "q", 1)  # a change that keeps the content
    assert _item_contents(data_dir) == {"a": b"", "q": b""}
    assert embedded.get(WRITER, "a").content == "Prefers phone calls."
    assert embedded.get(WRITER, "q").content == "Prefers fax."
    assert [h.item.content for h in embedded.search(WRITER, query("fax")).items] == ["Prefers fax."]
    conn = sqlite3.connect(data_dir / "gmem.sqlite3")  # damage for the rebuild to repair
    conn.execute("UPDATE memories SET confidence = 0.1, content = NULL WHERE id = 'a'")
    conn.execute("DELETE FROM search_docs WHERE item = (SELECT rowid FROM memories WHERE id = 'q')")
    conn.execute("DELETE FROM memories WHERE id = 'q'")
    conn.commit()
    conn.close()
    assert not embedded.verify_replay().ok
    assert embedded.maintenance.rebuild() == 2
    assert _item_contents(data_dir) == {"a": b"", "q": b""}
    assert embedded.verify_replay().ok

    embedded.forget_subject(WRITER, "customer-1")
    assert _item_contents(data_dir) == {"a": None, "q": None}
    assert embedded.store.subject_key("acme", "customer-1") is None
    assert embedded.store.get("acme", "a").content is None  # type: ignore[union-attr]
    assert embedded.verify_replay().ok


def test_an_item_whose_event_is_of_the_canonical_form_keeps_its_content_in_its_row(
    data_dir: Path,
) -> None:
    """Items of a store written before migration 12 keep their content in their rows
    through a change that keeps it (their events hold it in base64 only); a new version
    takes it from its compact event."""
    service = open_service(data_dir=data_dir, clock=FakeClock())
    service.write(WRITER, body(id="q", trust="untrusted", content="Prefers fax."))
    service.write(WRITER, body(id="a"))
    service.store.close()
    canonical_event_rows(data_dir / "gmem.sqlite3")
    sealed = _item_contents(data_dir)
    assert all(sealed.values())

    reopened = open_service(data_dir=data_dir, clock=FakeClock())
    try:
        reopened.promote(principal(name="reviewer"), "q", 1)
        reopened.write(WRITER, body(id="a", content="Prefers phone calls.", expected_version=1))
        contents = _item_contents(data_dir)
        assert contents == {"a": b"", "q": sealed["q"]}
        assert reopened.get(WRITER, "q").content == "Prefers fax."
        assert reopened.get(WRITER, "a").content == "Prefers phone calls."
        assert reopened.maintenance.rebuild() == 2
        assert _item_contents(data_dir) == contents
        assert reopened.verify_replay().ok
    finally:
        reopened.store.close()


def test_a_flipped_bit_in_the_content_an_item_takes_from_its_event_is_an_error(
    embedded: MemoryService, data_dir: Path
) -> None:
    """The content an item reads from its compact event is authenticated like a copy in
    its row: one bit changed there, and reading or finding the item raises."""
    embedded.write(WRITER, body(id="a", content="Alpha content that must stay intact."))
    assert _item_contents(data_dir) == {"a": b""}
    conn = sqlite3.connect(data_dir / "gmem.sqlite3")
    conn.execute("DROP TRIGGER events_refuse_update")
    (blob,) = conn.execute("SELECT content FROM events WHERE memory_id = 'a'").fetchone()
    flipped = bytearray(blob)
    flipped[30] ^= 0x01
    conn.execute("UPDATE events SET content = ? WHERE memory_id = 'a'", (bytes(flipped),))
    conn.commit()
    conn.close()
    with pytest.raises(CryptoError):
        embedded.get(WRITER, "a")
    with pytest.raises(CryptoError):
        embedded.search(WRITER, query("alpha"))


def test_a_write_reads_its_checks_and_its_tenants_chain_head_in_one_statement(
    embedded: MemoryService,
) -> None:
    """A write's commit reads the recorded index, its subject's key and its tenant's last
    event hash in one statement (one fewer a write), and the chain it links stays whole."""
    embedded.write(WRITER, body(id="m1", content="The first note."))
    store = embedded.store
    assert isinstance(store, SQLiteStore)
    statements: list[str] = []
    store.database.writer.set_trace_callback(statements.append)
    try:
        embedded.write(WRITER, body(id="m2", content="The second note."))
    finally:
        store.database.writer.set_trace_callback(None)
    reads = [sql for sql in statements if sql.lstrip().upper().startswith("SELECT")]
    assert len(reads) == 1, reads
    report = verify_chain(store)
    assert report.ok and report.events == 2


def test_a_transaction_left_open_on_the_reader_is_not_taken_for_a_snapshot(
    tmp_path: Path,
) -> None:
    """A snapshot opened inside this thread's snapshot shares it; a read transaction left
    open on the reader by something else is not one: the snapshot fails, rolls it back,
    and the next one begins afresh."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="OFF")
    database = store.database
    with database.snapshot(), database.snapshot():
        assert database.reader().in_transaction
    assert not database.reader().in_transaction
    database.reader().execute("BEGIN")

    with pytest.raises(StoreUnavailable), database.snapshot():
        pass

    assert not database.reader().in_transaction
    with database.snapshot():
        assert database.reader().in_transaction
    store.close()
