"""``Store.prompt`` and ``MemoryService.search(wait=False)``: a search asked not to wait is
made only if it is short and waits for nothing, else refused (``ReadWouldWait``) before
any posting is read; what it answers is what the search that may wait answers."""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from governed_memory.crypto import Keyring
from governed_memory.errors import ReadWouldWait, StoreUnavailable
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from governed_memory.service.indexing import SearchSettings
from governed_memory.store.sqlite import SQLiteStore
from governed_memory.store.sqlite import search as sqlite_search
from tests.support.embedder import FakeEmbedder
from tests.support.fakes import FakeClock, body, principal, query


def fill(service: MemoryService, count: int) -> None:
    for i in range(count):
        service.write(principal(), body(content=f"Refund {i} by email.", subject_id=f"s{i % 3}"))


def test_a_store_answers_a_search_asked_not_to_wait_only_if_it_can(
    service: MemoryService, store: Store
) -> None:
    """SQLite answers it (a small scope), exactly as the search that may wait; the
    in-memory store (a writer may hold its lock) and PostgreSQL (every read a round trip)
    refuse it at once."""
    fill(service, 5)
    expected = service.search(principal(), query("refund email")).to_dict()
    assert service.searches_at_once is isinstance(store, SQLiteStore)
    if isinstance(store, SQLiteStore):
        assert service.search(principal(), query("refund email"), wait=False).to_dict() == expected
    else:
        with pytest.raises(ReadWouldWait):
            service.search(principal(), query("refund email"), wait=False)
        with pytest.raises(ReadWouldWait), store.prompt():
            pass


def test_a_sqlite_search_over_the_bound_is_refused_before_its_postings_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scope's items times the query's distinct terms over ``PROMPT_POSTINGS``: refused
    after the scope's row, with no other statement; at the bound, answered. Outside
    ``prompt`` the bound does not apply."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="NORMAL")
    try:
        service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
        fill(service, 4)
        monkeypatch.setattr(sqlite_search, "PROMPT_POSTINGS", 8)  # 4 items, 2 terms
        assert service.search(principal(), query("refund email"), wait=False).items
        monkeypatch.setattr(sqlite_search, "PROMPT_POSTINGS", 7)
        statements: list[str] = []
        with store.prompt():
            store.database.reader().set_trace_callback(statements.append)
        try:
            with pytest.raises(ReadWouldWait):
                service.search(principal(), query("refund email"), wait=False)
        finally:
            with store.prompt():
                store.database.reader().set_trace_callback(None)
        read = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        assert len(read) == 2  # the snapshot's pin, then the scope's row
        assert "FROM scopes" in read[1] and "postings" not in " ".join(read)
        assert len(service.search(principal(), query("refund email")).items) == 4
    finally:
        store.close()


def test_inside_prompt_a_busy_sqlite_database_refuses_instead_of_failing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside ``prompt`` reads go to the reader that never waits, and busy is
    ``ReadWouldWait`` (asked again elsewhere); outside it, this thread's reader is used
    and a failure is ``StoreUnavailable`` as before."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="NORMAL")
    try:
        database = store.database
        with database.prompt():
            assert database.prompting
            assert database.reader() is database.prompt_reader()
        assert not database.prompting
        assert database.reader() is not database.prompt_reader()

        class Busy:
            in_transaction = False

            def execute(self, sql: str, params: Any = ()) -> Any:
                busy = sqlite3.OperationalError("database is locked")
                busy.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
                raise busy

        monkeypatch.setattr(database, "prompt_reader", Busy)
        with database.prompt(), pytest.raises(ReadWouldWait):
            database.query("SELECT 1")
        with database.prompt(), pytest.raises(ReadWouldWait), database.snapshot():
            pass
        monkeypatch.setattr(database, "reader", Busy)
        with pytest.raises(StoreUnavailable):
            database.query("SELECT 1")
    finally:
        store.close()


def test_a_search_with_semantic_recall_is_never_made_at_once(tmp_path: Path) -> None:
    """Embedding the query is long (a model's forward pass): refused before it is made."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="NORMAL")
    try:
        embedder = FakeEmbedder()
        service = MemoryService(
            store,
            Keyring(secrets.token_bytes(32)),
            clock=FakeClock(),
            search=SearchSettings(embedder=embedder),
        )
        fill(service, 2)
        assert not service.searches_at_once
        embedded = len(embedder.embedded)
        with pytest.raises(ReadWouldWait):
            service.search(principal(), query("refund"), wait=False)
        assert len(embedder.embedded) == embedded
        assert service.search(principal(), query("refund")).items
    finally:
        store.close()
