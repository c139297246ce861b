"""Applying batches to PostgreSQL: one transaction and one round trip per group.

Everything a batch changes (events, projection rows, postings, the idempotency record, the
subject-key check or destruction) commits in one transaction, and the database enforces
what a process lock cannot across nodes: a new item is an ``INSERT`` that the unique
constraint on ``(tenant_id, id)`` refuses when the id exists, a change is an ``UPDATE``
guarded by ``version``, and an idempotency key is a primary key. A refused batch is rolled
back and explained in one place (:meth:`PostgresBatches._explain`); every other driver
error becomes ``StoreUnavailable`` in another (:func:`.database.translate`).

A batch is one round trip: the write lock and its statements go out together in one
message and commit as one implicit transaction (:mod:`.exchange`), each statement prepared
once per connection. Concurrent callers in
one process share a transaction (:mod:`governed_memory.store.group_commit`), each
acknowledged only after that transaction commits; if one batch of a group is refused, the
others are committed again one by one, so only that one fails.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import suppress
from functools import partial
from typing import Any, TypeVar

import psycopg
from psycopg.pq.abc import PGresult
from psycopg.rows import TupleRow

from governed_memory.chain import GENESIS, event_digest
from governed_memory.codec import (
    EVENT_COLUMNS,
    ITEM_COLUMNS,
    idempotency_from_row,
    idempotency_result,
    item_row,
)
from governed_memory.core.events import Event, StoredEvent
from governed_memory.errors import (
    IdempotencyKeyTaken,
    StoreUnavailable,
    SubjectChanged,
    SubjectKeyGone,
    VersionConflict,
)
from governed_memory.records import (
    REBUILDING,
    SEARCH_INDEX,
    Batch,
    ItemChange,
    SubjectKey,
    serves_index,
)
from governed_memory.store.chain_links import event_columns
from governed_memory.store.group_commit import Pending
from governed_memory.store.postgres import exchange, sql
from governed_memory.store.postgres.database import Connection, PostgresDatabase, translate
from governed_memory.store.postgres.exchange import Statement

T = TypeVar("T")
Cursor = psycopg.Cursor[TupleRow]
log = logging.getLogger("governed_memory.store")


class PostgresBatches:
    """Commits groups of batches, each group in one transaction and one pipeline."""

    def __init__(self, database: PostgresDatabase) -> None:
        self._db = database

    def lock(self) -> Statement:
        """The first statement of a write transaction: the write lock, held until it ends.

        Why a lock: a position becomes visible to readers when its transaction commits,
        not when it is assigned. If two writers could take positions concurrently, the one
        holding position 8 might commit before the one holding 7, and a reader of
        ``events_after(after=6)`` would see 8, move its cursor past 7 and never see it.
        Holding this lock from before the first position is taken until the commit makes
        positions commit in order, across every instance on the database. It is an
        advisory lock rather than ``LOCK TABLE events IN EXCLUSIVE MODE`` because a table
        lock also conflicts with autovacuum and analyze of the log and would stall writers
        behind them. Taken first, it also serializes whole batches, as SQLite's
        ``BEGIN IMMEDIATE`` does, so every check sees every earlier commit (each later
        statement takes its snapshot after it) and no two writers can deadlock on row
        locks.
        """
        return (sql.LOCK_LOG, (self._db.log_lock,))

    def commit_group(self, group: list[Pending]) -> None:
        """Commit every batch of ``group`` in one transaction and one round trip.

        All the statements go out in one message (:mod:`.exchange`). A failed
        precondition raises inside its statement and aborts the rest on the server, which
        rolls the transaction back; if the group had several batches, each is then
        committed again on its own, so that only the refused one fails.
        """
        try:
            with self._db.connection() as conn:
                try:
                    self._commit_together(conn, group)
                except psycopg.IntegrityError as error:
                    if len(group) == 1:
                        group[0].error = self._explain(conn, group[0].batch, error)
                        return
                    for pending in group:
                        try:
                            self._commit_together(conn, [pending])
                        except psycopg.IntegrityError as alone:
                            pending.error = self._explain(conn, pending.batch, alone)
        except BaseException as error:  # what had not committed failed with it
            failure = (
                translate(error)
                if isinstance(error, Exception)
                else StoreUnavailable("the write was interrupted")
            )
            for pending in group:
                if not pending.committed:
                    pending.error, pending.result = pending.error or failure, []
            if not isinstance(error, Exception):
                raise
        finally:
            for pending in group:
                pending.done = True

    def _commit_together(self, conn: Connection, group: list[Pending]) -> None:
        """One transaction for ``group``: the lock, then its batches' statements, each
        checked in the SQLite store's order, sent in one message."""
        statements = [self.lock()]
        drops: list[int] = []
        positions = [_queue(statements, p.batch, drops) for p in group]
        results = exchange.run(conn, statements)
        _warn_stray_postings([results[i] for i in drops])
        for pending, indexes in zip(group, positions, strict=True):
            pending.committed = True
            pending.result = [
                StoredEvent(_position(results[i]), event)
                for event, i in zip(pending.batch.events, indexes, strict=True)
            ]

    @staticmethod
    def _explain(conn: Connection, batch: Batch, error: Exception) -> Exception:
        """The domain error of a batch refused by a constraint, read after its rollback.

        A unique violation (an idempotency key, an item id) or a failed guard (a version,
        the subject key, an undeleted item of a forgotten subject) is explained by what
        the database holds now, in the order the SQLite store checks: the idempotency key,
        the subject key, each item's version, the subject's other items.
        """
        tenant = batch.tenant_id
        if batch.index_signature is not None:
            row = conn.execute(sql.GET_META, (SEARCH_INDEX,)).fetchone()
            if not serves_index(None if row is None else row[0], batch.index_signature):
                return StoreUnavailable.index_rebuilt()
        if batch.idempotency is not None:
            credential, key = batch.idempotency.credential, batch.idempotency.key
            row = conn.execute(sql.GET_IDEMPOTENCY, (tenant, credential, key)).fetchone()
            if row is not None:
                return IdempotencyKeyTaken(idempotency_from_row(tenant, credential, key, row))
        required = batch.require_key
        if required is not None:
            rows = conn.execute(
                sql.GET_KEY_ID, {"tenant": required.tenant_id, "subject": required.subject_id}
            ).fetchall()
            if not rows or bytes(rows[0][0]) != required.key_id:
                return SubjectKeyGone("a subject key was destroyed before the write committed")
        for change in batch.changes:
            item = change.item
            rows = conn.execute(sql.GET_VERSION, {"tenant": tenant, "id": item.id}).fetchall()
            current = int(rows[0][0]) if rows else 0
            if current != change.expected_version:
                return VersionConflict(item.id, change.expected_version, current)
        if batch.destroy_key is not None:
            deleting = [c.item.id for c in batch.changes]
            left = conn.execute(sql.SUBJECT_LEFT, (tenant, batch.destroy_key, deleting)).fetchone()
            if left is not None:
                return SubjectChanged("a subject changed during its forget")
        return translate(error)

    def add_subject_key(self, key: SubjectKey) -> SubjectKey:
        """Store ``key`` unless the subject has one (one round trip); the stored one."""
        with self._db.connection() as conn:
            try:
                cursor = _pipelined(conn, partial(_send_subject_key, conn, key))
            except psycopg.Error:
                with suppress(psycopg.Error):  # a rollback failing must not hide the error
                    conn.rollback()
                raise
            row = cursor.fetchone()
        assert row is not None
        return SubjectKey(key.tenant_id, key.subject_id, bytes(row[0]), bytes(row[1]))


def _send_subject_key(conn: Connection, key: SubjectKey) -> Cursor:
    conn.execute("BEGIN")
    # Durable enough without waiting for its own flush: the key matters only to a batch
    # that requires it, and that batch commits synchronously, which flushes the
    # write-ahead log past this earlier commit record.
    conn.execute("SET LOCAL synchronous_commit TO OFF")
    conn.execute(sql.INSERT_SUBJECT_KEY, (key.tenant_id, key.subject_id, key.key_id, key.wrapped))
    conn.execute("COMMIT")
    return conn.execute(sql.GET_SUBJECT_KEY, (key.tenant_id, key.subject_id))


def _queue(statements: list[Statement], batch: Batch, drops: list[int]) -> list[int]:
    """Add ``batch``'s statements; the indexes of those returning its events' positions
    (those of the index drops are added to ``drops``)."""
    events = _item_and_event(statements, batch, drops)
    if events is None:
        for change in batch.changes:
            _write_item(statements, change, drops)
        events = _send_events(statements, batch)
    if batch.destroy_item_key is not None:
        statements.append(
            (sql.DESTROY_ITEM_KEY, {"tenant": batch.tenant_id, "id": batch.destroy_item_key})
        )
    if batch.destroy_key is not None:
        subject = {"tenant": batch.tenant_id, "subject": batch.destroy_key}
        statements.append((sql.DESTROY_ITEM_KEYS, subject))
        statements.append((sql.DESTROY_KEY, subject))
    return events


def _added(statements: list[Statement], statement: Statement) -> int:
    statements.append(statement)
    return len(statements) - 1


def _send_events(statements: list[Statement], batch: Batch) -> list[int]:
    """The batch's events, the first carrying its checks and small rows in one statement
    (:func:`.sql.guarded_event`): the index's signature, the idempotency record, the
    subject key's check, the new item's key. The indexes of the events' statements."""
    params = _guard_params(batch)
    statement = sql.guarded_event(
        index=batch.index_signature is not None,
        idempotency=batch.idempotency is not None,
        key=batch.require_key is not None,
        item_key=batch.new_item_key is not None,
        event=bool(batch.events),
    )
    if not batch.events:
        if params:
            statements.append((statement, params))
        return []
    first, *rest = batch.events
    return [
        _added(statements, (statement, event_params(first) | params)),
        *(_added(statements, (sql.INSERT_EVENT, event_params(e))) for e in rest),
    ]


def _item_and_event(
    statements: list[Statement], batch: Batch, drops: list[int]
) -> list[int] | None:
    """A batch of one item and its events, the item sharing its first event's statement
    (:func:`.sql.item_and_event`): the indexes of the events' statements; or ``None``
    (nothing added) for any other batch."""
    if len(batch.changes) != 1 or not batch.events:
        return None
    change, (first, *rest) = batch.changes[0], batch.events
    params = _item_params(change)
    for name, value in (event_params(first) | _guard_params(batch)).items():
        shared = sql.SHARED_PARAMS.get(name)
        if shared is None:
            params[sql.EVENT_PREFIX + name] = value
        elif value != params[shared]:  # the statement would give it the item's value
            return None
    statement = sql.item_and_event(
        new=change.expected_version == 0,
        indexed=change.index is not None,
        index=batch.index_signature is not None,
        idempotency=batch.idempotency is not None,
        key=batch.require_key is not None,
        item_key=batch.new_item_key is not None,
    )
    if change.expected_version != 0:
        item = change.item
        drops.append(
            _added(statements, (sql.DROP_INDEX, {"tenant": item.tenant_id, "id": item.id}))
        )
    return [
        _added(statements, (statement, params)),
        *(_added(statements, (sql.INSERT_EVENT, event_params(e))) for e in rest),
    ]


def _guard_params(batch: Batch) -> dict[str, Any]:
    """The named parameters of :func:`.sql.guarded_event` for ``batch``."""
    params: dict[str, Any] = {}
    if batch.index_signature is not None:
        signature = batch.index_signature
        params |= {
            "name": SEARCH_INDEX,
            "signature": signature,
            "rebuilding": REBUILDING + signature,
        }
    if batch.idempotency is not None:
        record = batch.idempotency
        params |= {
            "tenant": batch.tenant_id,
            "credential": record.credential,
            "key": record.key,
            "fingerprint": record.fingerprint,
            "result": idempotency_result(record),
            "logged": bool(batch.events),
        }
    if batch.require_key is not None:
        required = batch.require_key
        params |= {
            "k_tenant": required.tenant_id,
            "k_subject": required.subject_id,
            "k_key_id": required.key_id,
        }
    if batch.new_item_key is not None:
        key = batch.new_item_key
        params |= {
            "ik_tenant": key.tenant_id,
            "ik_memory": key.memory_id,
            "ik_subject": key.subject_id,
            "ik_key_id": key.key_id,
            "ik_wrapped": key.wrapped,
        }
    return params


def _write_item(statements: list[Statement], change: ItemChange, drops: list[int]) -> None:
    """The item's row (inserted, or updated under its version guard) and its postings."""
    item = change.item
    if change.expected_version != 0:
        drops.append(
            _added(statements, (sql.DROP_INDEX, {"tenant": item.tenant_id, "id": item.id}))
        )
    key = (change.expected_version == 0, change.index is not None)
    statements.append((sql.WRITE_ITEM[key], _item_params(change)))


def _item_params(change: ItemChange) -> dict[str, Any]:
    """The named parameters of :data:`.sql.WRITE_ITEM` for ``change``."""
    params = dict(zip(ITEM_COLUMNS, item_row(change.item), strict=True))
    if change.expected_version != 0:
        params["expected"] = change.expected_version
    index = change.index
    if index is not None:
        params["length"] = index.length
        # As array literals, cast by the statement: psycopg's dumper of a list of ints
        # costs ~30 µs an array (it inspects every element); a string costs nothing.
        params["terms"] = _array_literal(index.terms)
        params["tfs"] = _array_literal(index.terms.values())
        params["vector"] = index.vector
    return params


def _array_literal(numbers: Iterable[int]) -> str:
    """PostgreSQL's text form of an array of integers (``{1,-2,3}``)."""
    return "{" + ",".join(map(str, numbers)) + "}"


def _warn_stray_postings(drops: list[PGresult]) -> None:
    """Log (content-free) each index drop that had to delete postings by scan."""
    for result in drops:
        stray = int(result.get_value(0, 0) or 0) if result.ntuples else 0
        if stray:
            log.warning(
                "search document and postings disagreed; %d stray postings deleted by scan",
                stray,
            )


def _pipelined(conn: Connection, send: Callable[[], T]) -> T:
    """Run ``send``'s statements in one pipeline (one round trip); raise the first error.

    The driver may report a failed statement while later ones are still being queued, or
    only when the pipeline is drained; either way the pipeline is drained first, and the
    statement's own error is raised, not the "pipeline aborted" of those skipped after it.
    """
    first: psycopg.Error | None = None
    result: T | None = None
    try:
        with conn.pipeline():
            try:
                result = send()
            except psycopg.Error as error:
                first = error
    except psycopg.Error as error:
        first = first or _cause(error)
    if first is not None:
        raise first
    assert result is not None
    return result


def _cause(error: psycopg.Error) -> psycopg.Error:
    """The error that aborted a pipeline, when psycopg's exit raises ``PipelineAborted``.

    The pipeline's exit fetches the last results in a ``finally``: when a statement's
    error is raised from the exchange before it, a later statement's "pipeline aborted"
    raised in the ``finally`` replaces it, and the cause is then only its context. Read
    here, where the context is still the one Python set (a later ``raise`` inside an
    ``except`` overwrites it). Without this, the loser of a race for an item id was told
    the store failed instead of :class:`VersionConflict`.
    """
    found: BaseException = error
    while isinstance(found, psycopg.errors.PipelineAborted) and isinstance(
        found.__context__, psycopg.Error
    ):
        found = found.__context__
    return found if isinstance(found, psycopg.Error) else error


def event_params(event: Event) -> dict[str, Any]:
    """The named parameters of an event row (see ``sql.INSERT_EVENT``): its columns, and
    what its chain hash is computed from in SQL (its digest; the tenant's first event
    follows ``GENESIS``)."""
    columns = event_columns(event)
    params = dict(zip(EVENT_COLUMNS, columns, strict=True))
    return params | {"digest": event_digest(columns), "genesis": GENESIS}


def _position(result: PGresult) -> int:
    value = result.get_value(0, 0)
    assert value is not None
    return int(value)


__all__ = ["PostgresBatches", "event_params"]
