"""The PostgreSQL store: several service instances sharing one database.

Everything a batch changes (events, projection rows, postings, the idempotency record, the
subject-key check or destruction) commits in one transaction, and the database enforces
what a process lock cannot across nodes: a new item is an ``INSERT`` that the unique
constraint on ``(tenant_id, id)`` refuses when the id exists, a change is an ``UPDATE``
guarded by ``version``, and an idempotency key is a primary key. A refused batch is rolled
back and explained in one place (:meth:`PostgresStore._explain`); every other driver error
becomes ``StoreUnavailable`` in another (:func:`_translate`), by class, never by message.

Write transactions serialize on a transaction-level advisory lock (see
:meth:`PostgresStore._begin`), so positions are assigned and committed in order, gapless.
A batch is one round trip: its statements, ``COMMIT`` included, go out together in
pipeline mode, and psycopg prepares the hot ones on each connection. As in the SQLite
store, concurrent callers in one process share a transaction (group commit), each
acknowledged only after that transaction commits; if one batch of a group is refused, the
others are committed again one by one, so only that one fails.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from importlib import resources
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from governed_memory.codec import (
    API_KEY_COLUMNS,
    ITEM_COLUMNS,
    EventRow,
    api_key_from_row,
    api_key_row,
    event_from_row,
    event_row,
    item_from_row,
    item_row,
)
from governed_memory.core.events import Event, StoredEvent
from governed_memory.core.model import ItemState
from governed_memory.core.retrieval import (
    CONFIDENCE_WEIGHT,
    K1,
    RECENCY_HALF_LIFE_DAYS,
    RECENCY_WEIGHT,
    B,
    Candidate,
    ScopeStatistics,
    idf,
)
from governed_memory.core.values import from_micros, to_micros
from governed_memory.errors import (
    IdempotencyKeyTaken,
    LogMoved,
    ReadWouldWait,
    StoreUnavailable,
    SubjectChanged,
    SubjectKeyGone,
    VersionConflict,
)
from governed_memory.records import (
    ApiKey,
    Batch,
    IdempotencyRecord,
    ItemChange,
    SearchMatches,
    SearchRequest,
    SubjectKey,
)
from governed_memory.store import postgres_sql as q
from governed_memory.store.paging import paged_events

T = TypeVar("T")
Connection = psycopg.Connection[TupleRow]
Cursor = psycopg.Cursor[TupleRow]

# The high half of every advisory lock key this package takes ("gmem"), so that its locks
# do not collide with those of other applications sharing the database.
_LOCK_SPACE = 0x676D656D


def migrations() -> list[tuple[int, str]]:
    """The numbered PostgreSQL migrations shipped with the package, in order."""
    folder = resources.files("governed_memory.store.migrations").joinpath("postgres")
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text("utf-8")))
    return sorted(found)


def _lock_key(low: int) -> int:
    """A signed 64-bit advisory lock key in this package's space."""
    return (_LOCK_SPACE << 32) | (low & 0xFFFFFFFF)


def _name_hash(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=4).digest(), "big")


def _translate(error: Exception) -> Exception:
    """Domain errors pass through; driver and pool errors become ``StoreUnavailable``.

    By class: connection failures and pool timeouts are ``OperationalError``s, and any
    other driver error that reaches here is a failure of the store too. The message names
    the class only, never the driver's message, which may quote values.
    """
    if isinstance(error, psycopg.Error):
        return StoreUnavailable(f"PostgreSQL failed: {type(error).__name__}")
    return error


@dataclass
class _Pending:
    batch: Batch
    result: list[StoredEvent] = field(default_factory=list)
    error: BaseException | None = None
    committed: bool = False
    done: bool = False


class PostgresStore:
    """The store port over a PostgreSQL database, through a connection pool."""

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
        self._schema_sql = sql.Identifier(schema) if schema is not None else None
        self._write_lock = threading.Lock()
        self._queue_lock = threading.Lock()
        self._queue: list[_Pending] = []
        self._closed = False
        self._pinned = threading.local()  # a snapshot's connection, per thread
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            kwargs={"autocommit": True},
            configure=self._configure,
            name="governed-memory",
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
            self.migrate()
            (oid,) = self._query("SELECT 'events'::regclass::oid::bigint")[0]
            self._log_lock = _lock_key(int(oid))  # one write lock per events table
        except psycopg.Error as error:
            self._pool.close()
            raise _translate(error) from None
        except BaseException:
            self._pool.close()
            raise

    def _configure(self, conn: Connection) -> None:
        """Point a new connection at the store's schema (``None``: the server's default)."""
        if self._schema_sql is not None:
            conn.execute(sql.SQL("SET search_path TO {}").format(self._schema_sql))

    # -- connections ----------------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        if self._closed:
            raise StoreUnavailable("the store is closed")
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as error:
            raise _translate(error) from None

    def _query(self, query: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        pinned: Connection | None = getattr(self._pinned, "conn", None)
        if pinned is not None:
            try:
                return pinned.execute(query, params).fetchall()
            except psycopg.Error as error:
                raise _translate(error) from None
        with self._connection() as conn:
            return conn.execute(query, params).fetchall()

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """This thread's reads share one REPEATABLE READ, read-only transaction."""
        with self._connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            self._pinned.conn = conn
            try:
                yield
            finally:
                self._pinned.conn = None

    def migrate(self) -> list[int]:
        """Apply every migration not yet recorded, in one transaction.

        A transaction-level advisory lock (keyed by the schema) makes a second instance
        starting at the same moment wait, then find the migrations recorded and apply none.
        """
        applied: list[int] = []
        with self._connection() as conn, conn.transaction():
            key = _lock_key(_name_hash("migrate:" + (self.schema or "")))
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
            if self._schema_sql is not None:
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(self._schema_sql))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            for number, script in migrations():
                if number in done:
                    continue
                conn.execute(script.encode("utf-8"))
                conn.execute(
                    "INSERT INTO schema_migrations VALUES "
                    "(%s, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)",
                    (number,),
                )
                applied.append(number)
        return applied

    def schema_version(self) -> int:
        """The highest migration applied."""
        (version,) = self._query("SELECT coalesce(max(version), 0) FROM schema_migrations")[0]
        return int(version)

    def drop_schema(self) -> None:
        """Drop the store's schema and everything in it (tests use one schema per run)."""
        if self._schema_sql is None:
            raise ValueError("drop_schema needs a store opened with an explicit schema")
        with self._connection() as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(self._schema_sql))

    def close(self) -> None:
        if self._closed:
            return
        with self._write_lock:
            self._closed = True
            self._pool.close()

    def ping(self) -> None:
        self._query("SELECT 1 FROM schema_migrations LIMIT 1")

    # -- writes ---------------------------------------------------------------------------

    def _begin(self, conn: Connection) -> None:
        """Open a write transaction that holds the write lock until it ends.

        Why a lock: a position becomes visible to readers when its transaction commits,
        not when it is assigned. If two writers could take positions concurrently, the one
        holding position 8 might commit before the one holding 7, and a reader of
        ``events_after(after=6)`` would see 8, move its cursor past 7 and never see it.
        Holding this lock from before the first position is taken until the commit makes
        positions commit in order, across every instance on the database. It is an
        advisory lock rather than ``LOCK TABLE events IN EXCLUSIVE MODE`` because a table
        lock also conflicts with autovacuum and analyze of the log and would stall writers
        behind them. Taken first, it also serializes whole batches, as SQLite's
        ``BEGIN IMMEDIATE`` does, so every check sees every earlier commit and no two
        writers can deadlock on row locks.
        """
        conn.execute("BEGIN")
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._log_lock,))

    def commit(self, batch: Batch) -> list[StoredEvent]:
        pending = _Pending(batch)
        with self._queue_lock:
            self._queue.append(pending)
        with self._write_lock:
            if not pending.done:
                with self._queue_lock:
                    group, self._queue = self._queue, []
                self._commit_group(group)
        if pending.error is not None:
            raise pending.error
        return pending.result

    def _commit_group(self, group: list[_Pending]) -> None:
        """Commit every batch of ``group`` in one transaction and one round trip.

        All the statements, ``COMMIT`` included, go out in one pipeline. A failed
        precondition raises inside its statement and aborts the rest on the server; the
        transaction is then rolled back and, if the group had several batches, each is
        committed again on its own, so that only the refused one fails.
        """
        try:
            with self._connection() as conn:
                try:
                    self._commit_together(conn, group)
                except psycopg.IntegrityError as error:
                    conn.rollback()
                    if len(group) == 1:
                        group[0].error = self._explain(conn, group[0].batch, error)
                        return
                    for pending in group:
                        try:
                            self._commit_together(conn, [pending])
                        except psycopg.IntegrityError as alone:
                            conn.rollback()
                            pending.error = self._explain(conn, pending.batch, alone)
        except Exception as error:  # noqa: BLE001 - what had not committed failed with it
            failure = _translate(error)
            for pending in group:
                if not pending.committed:
                    pending.error, pending.result = pending.error or failure, []
        finally:
            for pending in group:
                pending.done = True

    def _commit_together(self, conn: Connection, group: list[_Pending]) -> None:
        """One transaction for ``group``: its batches' statements in one pipeline.

        ``conn.rollback()``, which the caller uses after a failure, also resets psycopg's
        cache of prepared statements: a statement whose turn to be prepared came in the
        aborted part of a pipeline is otherwise remembered as prepared though the server
        skipped it.
        """
        cursors = _pipelined(conn, partial(self._send, conn, [p.batch for p in group]))
        for pending, batch_cursors in zip(group, cursors, strict=True):
            pending.committed = True
            pending.result = [
                StoredEvent(_position(cursor), event)
                for event, cursor in zip(pending.batch.events, batch_cursors, strict=True)
            ]

    def _send(self, conn: Connection, batches: list[Batch]) -> list[list[Cursor]]:
        """Queue the transaction of ``batches``, each checked in the SQLite store's order.

        The cursors of the event inserts are returned, to read the positions from once
        the pipeline is synced.
        """
        self._begin(conn)
        cursors = []
        for batch in batches:
            tenant = batch.tenant_id
            if batch.idempotency is not None:
                record = batch.idempotency
                conn.execute(
                    q.INSERT_IDEMPOTENCY,
                    {
                        "tenant": tenant,
                        "key": record.key,
                        "fingerprint": record.fingerprint,
                        "result": json.dumps(dict(record.result), sort_keys=True),
                        "logged": bool(batch.events),
                    },
                )
            if batch.require_key is not None:
                key = batch.require_key
                conn.execute(
                    q.REQUIRE_KEY,
                    {"tenant": key.tenant_id, "subject": key.subject_id, "key_id": key.key_id},
                )
            for change in batch.changes:
                self._write_item(conn, change)
            cursors.append([conn.execute(q.INSERT_EVENT, _event_params(e)) for e in batch.events])
            if batch.destroy_key is not None:
                conn.execute(q.DESTROY_KEY, {"tenant": tenant, "subject": batch.destroy_key})
        conn.execute("COMMIT")
        return cursors

    @staticmethod
    def _write_item(conn: Connection, change: ItemChange) -> None:
        item = change.item
        params = dict(zip(ITEM_COLUMNS, item_row(item), strict=True))
        if change.expected_version != 0:
            conn.execute(q.DROP_INDEX, {"tenant": item.tenant_id, "id": item.id})
            params["expected"] = change.expected_version
        index = change.index
        if index is not None:
            params["length"] = index.length
            params["terms"] = list(index.terms)
            params["tfs"] = list(index.terms.values())
        conn.execute(q.WRITE_ITEM[(change.expected_version == 0, index is not None)], params)

    def _explain(self, conn: Connection, batch: Batch, error: Exception) -> Exception:
        """The domain error of a batch refused by a constraint, read after its rollback.

        A unique violation (an idempotency key, an item id) or a failed guard (a version,
        the subject key, an undeleted item of a forgotten subject) is explained by what
        the database holds now, in the order the SQLite store checks: the idempotency key,
        the subject key, each item's version, the subject's other items.
        """
        tenant = batch.tenant_id
        if batch.idempotency is not None:
            record = self._idempotency(conn, tenant, batch.idempotency.key)
            if record is not None:
                return IdempotencyKeyTaken(record)
        required = batch.require_key
        if required is not None:
            rows = conn.execute(
                q.GET_KEY_ID, {"tenant": required.tenant_id, "subject": required.subject_id}
            ).fetchall()
            if not rows or bytes(rows[0][0]) != required.key_id:
                return SubjectKeyGone("a subject key was destroyed before the write committed")
        for change in batch.changes:
            item = change.item
            rows = conn.execute(q.GET_VERSION, {"tenant": tenant, "id": item.id}).fetchall()
            current = int(rows[0][0]) if rows else 0
            if current != change.expected_version:
                return VersionConflict(item.id, change.expected_version, current)
        if batch.destroy_key is not None:
            left = conn.execute(
                "SELECT 1 FROM memories WHERE tenant_id = %s AND subject_id = %s "
                "AND status <> 'deleted' AND NOT id = ANY (%s) LIMIT 1",
                (tenant, batch.destroy_key, [c.item.id for c in batch.changes]),
            ).fetchone()
            if left is not None:
                return SubjectChanged("a subject changed during its forget")
        return _translate(error)

    def add_subject_key(self, key: SubjectKey) -> SubjectKey:
        params = {
            "tenant": key.tenant_id,
            "subject": key.subject_id,
            "key_id": key.key_id,
            "wrapped": key.wrapped,
        }
        with self._connection() as conn:
            try:
                cursor = _pipelined(conn, partial(self._send_subject_key, conn, params))
            except psycopg.Error:
                conn.rollback()
                raise
            row = cursor.fetchone()
        assert row is not None
        return SubjectKey(key.tenant_id, key.subject_id, bytes(row[0]), bytes(row[1]))

    @staticmethod
    def _send_subject_key(conn: Connection, params: dict[str, Any]) -> Cursor:
        conn.execute("BEGIN")
        # Durable enough without waiting for its own flush: the key matters only to a batch
        # that requires it, and that batch commits synchronously, which flushes the
        # write-ahead log past this earlier commit record.
        conn.execute("SET LOCAL synchronous_commit TO OFF")
        conn.execute(q.INSERT_SUBJECT_KEY, params)
        conn.execute("COMMIT")
        return conn.execute(q.GET_SUBJECT_KEY, params)

    # -- reads ----------------------------------------------------------------------------

    def get(self, tenant_id: str, memory_id: str) -> ItemState | None:
        rows = self._query(q.GET_ITEM, {"tenant": tenant_id, "id": memory_id})
        return item_from_row(rows[0]) if rows else None

    def get_many(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, ItemState]:
        if not memory_ids:
            return {}
        rows = self._query(
            q.ITEM_SELECT + " WHERE tenant_id = %s AND id = ANY (%s)",
            (tenant_id, list(memory_ids)),
        )
        items = (item_from_row(row) for row in rows)
        return {item.id: item for item in items}

    def subject_items(self, tenant_id: str, subject_id: str) -> list[ItemState]:
        rows = self._query(
            q.ITEM_SELECT + " WHERE tenant_id = %s AND subject_id = %s ORDER BY id",
            (tenant_id, subject_id),
        )
        return [item_from_row(row) for row in rows]

    def subject_key(self, tenant_id: str, subject_id: str) -> SubjectKey | None:
        rows = self._query(q.GET_SUBJECT_KEY, {"tenant": tenant_id, "subject": subject_id})
        if not rows:
            return None
        return SubjectKey(tenant_id, subject_id, bytes(rows[0][0]), bytes(rows[0][1]))

    def subject_keys_for(self, tenant_id: str, subject_ids: Sequence[str]) -> dict[str, SubjectKey]:
        wanted = sorted(set(subject_ids))
        if not wanted:
            return {}
        rows = self._query(
            "SELECT subject_id, key_id, wrapped FROM subject_keys "
            "WHERE tenant_id = %(tenant)s AND subject_id = ANY(%(subjects)s)",
            {"tenant": tenant_id, "subjects": wanted},
        )
        return {s: SubjectKey(tenant_id, s, bytes(k), bytes(w)) for s, k, w in rows}

    def idempotency(self, tenant_id: str, key: str) -> IdempotencyRecord | None:
        with self._connection() as conn:
            return self._idempotency(conn, tenant_id, key)

    def _idempotency(self, conn: Connection, tenant_id: str, key: str) -> IdempotencyRecord | None:
        row = conn.execute(q.GET_IDEMPOTENCY, {"tenant": tenant_id, "key": key}).fetchone()
        if row is None:
            return None
        return IdempotencyRecord(tenant_id, key, row[0], json.loads(row[1]), row[2])

    def events_after(self, tenant_id: str | None, after: int, limit: int) -> list[StoredEvent]:
        if tenant_id is None:
            rows = self._query(q.EVENTS_AFTER, {"after": after, "limit": limit})
        else:
            rows = self._query(
                q.TENANT_EVENTS_AFTER, {"tenant": tenant_id, "after": after, "limit": limit}
            )
        return [_stored(row) for row in rows]

    def memory_events(self, tenant_id: str, memory_id: str, subject_id: str) -> list[StoredEvent]:
        rows = self._query(
            f"SELECT {q.EVENT_COLUMNS} FROM events WHERE tenant_id = %s AND memory_id = %s "
            f"UNION ALL SELECT {q.EVENT_COLUMNS} FROM events WHERE tenant_id = %s "
            "AND subject_id = %s AND type = 'subject.forgotten' ORDER BY position",
            (tenant_id, memory_id, tenant_id, subject_id),
        )
        return [_stored(row) for row in rows]

    def due_for_expiry(self, now: datetime, limit: int) -> list[ItemState]:
        rows = self._query(
            q.ITEM_SELECT + " WHERE status IN ('active', 'quarantined') AND expires_at <= %s "
            "ORDER BY expires_at, tenant_id, id LIMIT %s",
            (to_micros(now), limit),
        )
        return [item_from_row(row) for row in rows]

    def quarantine(
        self,
        tenant_id: str,
        agents: frozenset[str] | None,
        agent_id: str | None,
        purpose: str | None,
        limit: int,
        after: tuple[int, str] | None,
    ) -> list[ItemState]:
        query = q.ITEM_SELECT + " WHERE tenant_id = %s AND status = 'quarantined'"
        params: list[Any] = [tenant_id]
        if agents is not None:
            query += " AND agent_id = ANY (%s::text[])"
            params.append(sorted(agents))
        if agent_id is not None:
            query += " AND agent_id = %s"
            params.append(agent_id)
        if purpose is not None:
            query += " AND purpose = %s"
            params.append(purpose)
        if after is not None:
            query += " AND (updated_at, id) > (%s, %s)"
            params += list(after)
        query += " ORDER BY updated_at, id LIMIT %s"
        params.append(limit)
        return [item_from_row(row) for row in self._query(query, params)]

    def search(self, request: SearchRequest) -> SearchMatches:
        """Scope statistics, then the matches of the query terms, hard-filtered in SQL.

        With ``want`` set, the database also scores each match with the core's formula and
        returns only those that can rank in the top ``want`` (and near-ties of the last),
        so a common term in a large scope costs an aggregate in the server, not tens of
        thousands of rows shipped to Python. The core then ranks the survivors exactly.
        """
        terms = list(dict.fromkeys(request.terms))
        if not terms:
            return SearchMatches(ScopeStatistics(0, 0, {}), [])
        rows = self._query(
            q.SCOPE_STATISTICS,
            {
                "terms": terms,
                "tenant": request.tenant_id,
                "agent": request.agent_id,
                "purpose": request.purpose,
            },
        )
        if not rows:
            return SearchMatches(ScopeStatistics(0, 0, {}), [])
        scope, documents, total_length = rows[0][:3]
        frequency = {int(row[3]): int(row[4]) for row in rows}
        statistics = ScopeStatistics(int(documents), int(total_length), frequency)
        if not any(frequency.values()):
            return SearchMatches(statistics, [])
        query, params = self.candidate_query(scope, request, statistics)
        candidates = []
        complete = True
        for memory_id, terms_, tfs, length, confidence, updated_at, tokens, pruned in self._query(
            query, params
        ):
            complete = complete and not pruned
            candidates.append(
                Candidate(
                    memory_id,
                    dict(zip(terms_, tfs, strict=True)),
                    length,
                    confidence,
                    from_micros(updated_at),
                    tokens,
                )
            )
        return SearchMatches(statistics, candidates, complete)

    @staticmethod
    def candidate_query(
        scope: int, request: SearchRequest, statistics: ScopeStatistics
    ) -> tuple[str, dict[str, Any]]:
        """The SQL that applies every hard filter of SPEC §6.1 inside the scope's postings.

        Each row is one match with its term frequencies, and whether matches were pruned.
        """
        terms = list(dict.fromkeys(request.terms))
        params: dict[str, Any] = {
            "scope": scope,
            "terms": terms,
            "weights": [idf(statistics.documents, statistics.document_frequency[t]) for t in terms],
            "tenant": request.tenant_id,
            "agent": request.agent_id,
            "purpose": request.purpose,
            "now": to_micros(request.now),
            "k1": K1,
            "b": B,
            "average": statistics.average_length,
            "confidence_weight": CONFIDENCE_WEIGHT,
            "recency_weight": RECENCY_WEIGHT,
            "half_life": RECENCY_HALF_LIFE_DAYS * 86_400 * 1_000_000,
            "want": request.want,
        }
        kinds = item_kinds = ""
        if request.kinds is not None:
            kinds = " AND p.kind = ANY (%(kinds)s::text[])"
            item_kinds = " AND m.kind = ANY (%(kinds)s::text[])"
            params["kinds"] = sorted(kind.value for kind in request.kinds)
        if request.subject_id is not None:
            params["subject"] = request.subject_id
            return q.SUBJECT_CANDIDATES.format(item_kinds=item_kinds), params
        return q.SCOPE_CANDIDATES.format(kinds=kinds, item_kinds=item_kinds), params

    def explain(self, query: str, params: Sequence[Any] | Mapping[str, Any]) -> list[str]:
        """The plan PostgreSQL chooses (used by the tests that assert index access)."""
        return [row[0] for row in self._query("EXPLAIN (COSTS OFF) " + query, params)]

    # -- whole-log access -----------------------------------------------------------------

    def tenants(self) -> list[str]:
        rows = self._query("SELECT DISTINCT tenant_id FROM events ORDER BY tenant_id")
        return [row[0] for row in rows]

    def tenant_events(self, tenant_id: str) -> Iterator[StoredEvent]:
        return paged_events(self.events_after, tenant_id)

    def tenant_items(self, tenant_id: str) -> Iterator[ItemState]:
        rows = self._query(q.ITEM_SELECT + " WHERE tenant_id = %s ORDER BY id", (tenant_id,))
        return (item_from_row(row) for row in rows)

    def head(self) -> int:
        (position,) = self._query("SELECT coalesce(max(position), 0) FROM events")[0]
        return int(position)

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """One write transaction holding the write lock (admin paths, outside grouping)."""
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._log_lock,))
            yield conn

    def import_events(self, events: Sequence[StoredEvent]) -> None:
        with self._transaction() as conn:
            row = conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()
            head = int(row[0]) if row else 0
            params = []
            for stored in events:
                if stored.position <= head:
                    raise ValueError(
                        f"event position {stored.position} is not above the log head {head}"
                    )
                head = stored.position
                params.append({"position": stored.position} | _event_params(stored.event))
            with conn.cursor() as cursor:
                cursor.executemany(
                    f"INSERT INTO events ({q.EVENT_COLUMNS}) "
                    f"VALUES (%(position)s, {q.EVENT_VALUES})",
                    params,
                )

    def rebuild(self, tenant_id: str, changes: Sequence[ItemChange], through: int) -> None:
        with self._transaction() as conn:
            # _transaction holds the log's write lock: no event can land until this
            # rebuild commits, so the check below cannot be overtaken.
            row = conn.execute(
                "SELECT coalesce(max(position), 0) FROM events WHERE tenant_id = %s", (tenant_id,)
            ).fetchone()
            if (int(row[0]) if row else 0) != through:
                raise LogMoved(f"tenant {tenant_id!r} has events after position {through}")
            scopes = [
                row[0]
                for row in conn.execute("SELECT id FROM scopes WHERE tenant_id = %s", (tenant_id,))
            ]
            conn.execute("DELETE FROM postings WHERE scope = ANY (%s::bigint[])", (scopes,))
            conn.execute("DELETE FROM search_docs WHERE scope = ANY (%s::bigint[])", (scopes,))
            conn.execute(
                "UPDATE scopes SET documents = 0, total_length = 0 WHERE tenant_id = %s",
                (tenant_id,),
            )
            conn.execute("DELETE FROM memories WHERE tenant_id = %s", (tenant_id,))
            if changes:
                _load(conn, tenant_id, changes)

    def subject_keys(self, limit: int | None = None) -> Iterator[SubjectKey]:
        rows = self._query(
            "SELECT tenant_id, subject_id, key_id, wrapped FROM subject_keys "
            "ORDER BY tenant_id, subject_id LIMIT %s",
            (limit,),  # LIMIT NULL reads every row
        )
        return (SubjectKey(t, s, bytes(k), bytes(w)) for t, s, k, w in rows)

    def add_api_key(self, key: ApiKey) -> None:
        marks = ", ".join("%s" for _ in API_KEY_COLUMNS)
        self._query(
            f"INSERT INTO api_keys ({', '.join(API_KEY_COLUMNS)}) VALUES ({marks}) "
            "RETURNING key_id",
            api_key_row(key),
        )

    def api_key(self, key_id: str, *, wait: bool = True) -> ApiKey | None:
        if not wait:
            raise ReadWouldWait("a PostgreSQL read is a network round trip")
        rows = self._query(q.API_KEY_SELECT + " WHERE key_id = %s", (key_id,))
        return api_key_from_row(rows[0]) if rows else None

    def api_keys(self, tenant_id: str | None = None) -> list[ApiKey]:
        query = q.API_KEY_SELECT
        params: tuple[str, ...] = ()
        if tenant_id is not None:
            query += " WHERE tenant_id = %s"
            params = (tenant_id,)
        rows = self._query(query + " ORDER BY tenant_id, created_at, key_id", params)
        return [api_key_from_row(row) for row in rows]

    def revoke_api_key(self, key_id: str, at: datetime) -> bool:
        rows = self._query(
            "UPDATE api_keys SET revoked_at = coalesce(revoked_at, %s) WHERE key_id = %s "
            "RETURNING key_id",
            (to_micros(at), key_id),
        )
        return bool(rows)


def _load(conn: Connection, tenant_id: str, changes: Sequence[ItemChange]) -> None:
    """Bulk-load a tenant's projection rows and postings with COPY."""
    indexed = sorted({(c.item.agent_id, c.item.purpose) for c in changes if c.index is not None})
    conn.execute(
        "INSERT INTO scopes (tenant_id, agent_id, purpose) "
        "SELECT %s, a, p FROM unnest(%s::text[], %s::text[]) AS k (a, p) "
        "ON CONFLICT (tenant_id, agent_id, purpose) DO NOTHING",
        (tenant_id, [k[0] for k in indexed], [k[1] for k in indexed]),
    )
    scope_ids = {
        (agent, purpose): scope
        for agent, purpose, scope in conn.execute(
            "SELECT agent_id, purpose, id FROM scopes WHERE tenant_id = %s", (tenant_id,)
        )
    }
    rowids = [
        row[0]
        for row in conn.execute(
            "SELECT nextval(pg_get_serial_sequence('memories', 'rowid')) "
            "FROM generate_series(1, %s)",
            (len(changes),),
        )
    ]
    docs: list[tuple[int, int, int, list[int]]] = []
    with conn.cursor() as cursor:
        with cursor.copy(f"COPY memories (rowid, {q.COLUMNS}) FROM STDIN") as copy:
            for rowid, change in zip(rowids, changes, strict=True):
                copy.write_row((rowid, *item_row(change.item)))
        with cursor.copy(
            "COPY postings (scope, term, item, tf, length, confidence, updated_at, expires_at, "
            "kind) FROM STDIN"
        ) as copy:
            for rowid, change in zip(rowids, changes, strict=True):
                item, index = change.item, change.index
                if index is None:
                    continue
                scope = scope_ids[(item.agent_id, item.purpose)]
                docs.append((rowid, scope, index.length, list(index.terms)))
                static = (
                    item.confidence,
                    to_micros(item.updated_at),
                    to_micros(item.expires_at),
                    item.kind.value,
                )
                for term, tf in index.terms.items():
                    copy.write_row((scope, term, rowid, tf, index.length, *static))
        with cursor.copy("COPY search_docs (item, scope, length, terms) FROM STDIN") as copy:
            for doc in docs:
                copy.write_row(doc)
    conn.execute(
        "UPDATE scopes SET documents = agg.documents, total_length = agg.total_length "
        "FROM (SELECT scope, count(*) AS documents, sum(length) AS total_length "
        "FROM search_docs WHERE scope = ANY (%s::bigint[]) GROUP BY scope) AS agg "
        "WHERE scopes.id = agg.scope",
        (sorted(set(scope_ids.values())),),
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
        first = first or error
    if first is not None:
        raise first
    assert result is not None
    return result


def _event_params(event: Event) -> dict[str, Any]:
    row = event_row(event)
    return {name: getattr(row, name) for name in q.EVENT_FIELDS}


def _stored(row: tuple[Any, ...]) -> StoredEvent:
    return StoredEvent(row[0], event_from_row(EventRow(*row[1:])))


def _position(cursor: Cursor) -> int:
    row = cursor.fetchone()
    assert row is not None
    return int(row[0])
