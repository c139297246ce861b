"""The embedded SQLite store: one file, WAL, durable commits, secure delete.

Writes go through a leader/follower group commit (:mod:`governed_memory.store.group_commit`):
whoever holds the write lock takes every queued batch, applies each inside its own
savepoint in one ``BEGIN IMMEDIATE`` transaction, commits once, and only then wakes their
callers (:mod:`.batch`). A failed batch rolls back to its savepoint and fails alone.

Positions are ``INTEGER PRIMARY KEY AUTOINCREMENT`` assigned inside the write
transaction; SQLite admits one writer at a time (even across processes, through
``BEGIN IMMEDIATE``), so positions commit in increasing order and a reader of
``events_after`` can never miss an event that commits late with a lower position.

The store is wiring: :mod:`.database` holds the connections, :mod:`.batch` the writes,
:mod:`.search` and :mod:`.top_k` the search, :mod:`.bulk` import and rebuild, and the
reads are shared with PostgreSQL (:mod:`governed_memory.store.sql_reads`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from governed_memory.core.events import StoredEvent
from governed_memory.records import (
    Batch,
    IdempotencyRecord,
    IndexedContent,
    IntactCheck,
    ItemKey,
    SearchMatches,
    SearchRequest,
    SubjectKey,
    TenantRebuild,
)
from governed_memory.store import rebuild_diff
from governed_memory.store.group_commit import GroupCommit
from governed_memory.store.sql_reads import SQLReads
from governed_memory.store.sql_sessions import SQLSessions
from governed_memory.store.sqlite import bulk, intact, sql
from governed_memory.store.sqlite.batch import SQLiteBatches
from governed_memory.store.sqlite.database import SQLiteDatabase, Synchronous
from governed_memory.store.sqlite.held import Held, held_rows
from governed_memory.store.sqlite.search import SQLiteSearch

DATABASE_FILE = "gmem.sqlite3"


class SQLiteStore(SQLReads, SQLSessions):
    """The store port over one SQLite database file."""

    #: A search reads its candidates' rows and keys in one statement, in the snapshot of
    #: its matches (search.py): one read instead of three after ranking; but not those of
    #: a search with many candidates (a subject's matches are not pruned ahead), whose
    #: few chosen hits the caller reads after ranking, in the same snapshot.
    reads_rows_with_matches = True
    rows_with_matches_partial = True
    #: A small scope is searched in about the time a hop to a worker thread costs.
    prompt_searches = True

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout_ms: int = 10_000,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self.synchronous = synchronous
        # read_only: for commands that only read (export, replay --verify, keys list), so
        # a store on read-only media can still be exported; nothing is migrated or written.
        self.database = SQLiteDatabase(self.path, synchronous, busy_timeout_ms, read_only=read_only)
        super().__init__(self.database, sql)
        self._batches = SQLiteBatches(self.database)
        self._group = GroupCommit(self._batches.commit_group, lock=self.database.write_lock)
        self._search = SQLiteSearch(self.database)
        # During a rebuild: the item and document rows of tenants read with their index
        # entries, kept for their swap (Held), at most COMPARED_ITEMS items in all.
        self._held: dict[str, Held] | None = None
        try:
            self.migrate()
            if not read_only:
                self.database.resume_purge()  # a destroyed key must not outlive a crash
        except BaseException:
            self.database.close()
            raise

    @classmethod
    def in_directory(cls, directory: str | Path, **options: Any) -> SQLiteStore:
        """The store kept in ``directory/gmem.sqlite3``."""
        return cls(Path(directory) / DATABASE_FILE, **options)

    def migrate(self) -> list[int]:
        """Apply every migration not yet recorded, each in its own transaction."""
        return self.database.migrate()

    def close(self) -> None:
        self.database.close()

    def ping(self) -> None:
        self.database.ping()

    def checkpoint(self) -> bool:
        """Copy the WAL into the database and truncate it; True when the WAL is empty."""
        with self.database.write_lock:
            return self.database.checkpoint()

    def snapshot(self) -> AbstractContextManager[None]:
        """One read transaction on this thread's connection: WAL gives it a fixed view."""
        return self.database.snapshot()

    def prompt(self) -> AbstractContextManager[None]:
        """This thread's reads on its reader that never waits (a busy database raises
        ``ReadWouldWait``), and a search whose scope's items times its terms exceed
        :data:`~.search.PROMPT_POSTINGS` refused the same way once its scope row is read,
        before any posting is."""
        return self.database.prompt()

    # -- writes ---------------------------------------------------------------------------

    def commit(self, batch: Batch) -> list[StoredEvent]:
        return self._group.commit(batch)

    def add_subject_key(self, key: SubjectKey) -> SubjectKey:
        return self._batches.add_subject_key(key)

    def import_events(self, events: Sequence[StoredEvent]) -> None:
        bulk.import_events(self.database, events)

    def import_item_keys(self, keys: Sequence[ItemKey]) -> None:
        bulk.import_item_keys(self.database, keys)

    def import_idempotency(self, records: Sequence[IdempotencyRecord]) -> None:
        bulk.import_idempotency(self.database, records)

    @contextmanager
    def rebuilding(self) -> Iterator[None]:
        """Each swap of tenants commits without waiting for the disk (``synchronous =
        NORMAL`` for that transaction alone: WAL keeps the file consistent, a crash loses
        at most the last tenants, which a rebuild does again); the log is made durable
        once, at the end. Other writes meanwhile keep their own fsync.

        Inside, :meth:`index_entries` reads a tenant's item and document rows in one
        snapshot, makes the entries from them and keeps them for the tenant's swap, which
        then reads them again only if anything was committed meanwhile."""
        outer = self._held is None
        if outer:
            self._held = {}
        try:
            with self.database.deferred_sync():
                yield
        finally:
            if outer:
                self._held = None

    def index_entries(self, tenant_id: str) -> dict[str, IndexedContent]:
        held = self._held
        if held is None:
            return super().index_entries(tenant_id)
        held.pop(tenant_id, None)
        room = rebuild_diff.COMPARED_ITEMS - sum(len(h.items) for h in list(held.values()))
        rows = held_rows(self.database, tenant_id, room)
        if rows is None:  # too large to keep: its swap reads its rows
            return super().index_entries(tenant_id)
        held[tenant_id] = rows
        return rows.entries()

    def check_intact(self, tenants: Sequence[str]) -> IntactCheck:
        """The tenants whose rows are the fold of their logs, checked in worker processes
        on read-only connections (:mod:`.intact`; none for a small log)."""
        return intact.check(self.database, tenants, self.head(), self._batches.scope_ids.update)

    def rebuild(self, tenants: Sequence[TenantRebuild]) -> set[str]:
        """Replace the tenants' rows in bulk, in one transaction: a few statements per
        tenant and per chunk of items, not a few per item."""
        held = self._held
        kept: dict[str, Held] = {}
        if held is not None:
            kept = {t.tenant_id: h for t in tenants if (h := held.pop(t.tenant_id, None))}
        moved, scopes = bulk.rebuild(self.database, tenants, kept)
        self._batches.scope_ids.update(scopes)  # only once the scope rows are committed
        return moved

    # -- search ---------------------------------------------------------------------------

    def search(self, request: SearchRequest) -> SearchMatches:
        return self._search.search(request)

    def explain(self, statement: str, params: Sequence[Any]) -> list[str]:
        """The query plan SQLite chooses (used by the tests that assert scoped access)."""
        return [row[3] for row in self.database.query("EXPLAIN QUERY PLAN " + statement, params)]


__all__ = ["DATABASE_FILE", "SQLiteStore", "Synchronous"]
