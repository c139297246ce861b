"""The PostgreSQL store: several service instances sharing one database.

Everything a batch changes commits in one transaction, and the database enforces what a
process lock cannot across nodes (:mod:`.batch`). Write transactions serialize on a
transaction-level advisory lock (see :meth:`.batch.PostgresBatches.lock`), so positions
are assigned and committed in order, gapless. As in the SQLite store, concurrent callers
in one process share a transaction (group commit), each acknowledged only after that
transaction commits.

The store is wiring: :mod:`.database` holds the pool, :mod:`.batch` the writes,
:mod:`.search` the search, :mod:`.bulk` import and rebuild, and the reads are shared with
SQLite (:mod:`governed_memory.store.sql_reads`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from governed_memory.core.events import StoredEvent
from governed_memory.errors import ReadWouldWait
from governed_memory.records import (
    Batch,
    IdempotencyRecord,
    ItemKey,
    SearchMatches,
    SearchRequest,
    SubjectKey,
    TenantRebuild,
)
from governed_memory.store.group_commit import GroupCommit
from governed_memory.store.postgres import bulk, search, sql
from governed_memory.store.postgres.batch import PostgresBatches
from governed_memory.store.postgres.database import PostgresDatabase
from governed_memory.store.sql_reads import SQLReads
from governed_memory.store.sql_sessions import SQLSessions


class PostgresStore(SQLReads, SQLSessions):
    """The store port over a PostgreSQL database, through a connection pool."""

    #: A search's rows and keys ride in its one statement (:mod:`.search`).
    reads_rows_with_matches = True
    rows_with_matches_partial = False
    #: Every read is a round trip on the network.
    prompt_searches = False

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
    ) -> None:
        self.schema = schema
        self.database = PostgresDatabase(
            dsn, schema=schema, min_size=min_size, max_size=max_size, timeout=timeout
        )
        super().__init__(self.database, sql)
        self._batches = PostgresBatches(self.database)
        self._group = GroupCommit(self._batches.commit_group, lock=self.database.write_lock)

    def migrate(self) -> list[int]:
        """Apply every migration not yet recorded, in one transaction."""
        return self.database.migrate()

    def drop_schema(self) -> None:
        """Drop the store's schema and everything in it (tests use one schema per run)."""
        self.database.drop_schema()

    def close(self) -> None:
        self.database.close()

    def ping(self) -> None:
        self.database.ping()

    def snapshot(self) -> AbstractContextManager[None]:
        """This thread's reads share one REPEATABLE READ, read-only transaction."""
        return self.database.snapshot()

    @contextmanager
    def prompt(self) -> Iterator[None]:
        """Every read is a network round trip: refused at once (``ReadWouldWait``)."""
        raise ReadWouldWait("PostgreSQL reads are made from a worker thread")
        yield  # pragma: no cover - a generator, never reached

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

    def rebuilding(self) -> AbstractContextManager[None]:
        return nullcontext()  # each swap of tenants commits durably on its own

    def rebuild(self, tenants: Sequence[TenantRebuild]) -> set[str]:
        return bulk.rebuild(self.database, tenants)

    # -- search ---------------------------------------------------------------------------

    def search(self, request: SearchRequest) -> SearchMatches:
        return search.search(self.database, request)

    def explain(self, query: str, params: Sequence[Any] | Mapping[str, Any]) -> list[str]:
        """The plan PostgreSQL chooses (used by the tests that assert index access)."""
        return [row[0] for row in self.database.query("EXPLAIN (COSTS OFF) " + query, params)]


__all__ = ["PostgresStore"]
