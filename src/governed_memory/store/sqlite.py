"""The embedded SQLite store: one file, WAL, durable commits, secure delete.

Writes go through a leader/follower group commit: every caller queues its batch; whoever
holds the write lock takes every queued batch, applies each inside its own savepoint in
one ``BEGIN IMMEDIATE`` transaction, commits once, and only then wakes their callers. A
lone writer pays one commit per batch, exactly as without grouping; sixteen concurrent
writers share fsyncs. A failed batch rolls back to its savepoint and fails alone.

Positions are ``INTEGER PRIMARY KEY AUTOINCREMENT`` assigned inside the write
transaction; SQLite admits one writer at a time (even across processes, through
``BEGIN IMMEDIATE``), so positions commit in increasing order and a reader of
``events_after`` can never miss an event that commits late with a lower position.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from array import array
from collections import ChainMap, Counter
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, Literal

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
from governed_memory.core.events import StoredEvent
from governed_memory.core.model import ItemState
from governed_memory.core.retrieval import ScopeStatistics
from governed_memory.core.values import to_micros
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
from governed_memory.store.paging import paged_events
from governed_memory.store.sqlite_search import (
    SMALL_SCOPE_POSTINGS,
    ScopedSearch,
    document_frequency,
    few_postings,
)

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
DATABASE_FILE = "gmem.sqlite3"

_ITEM_SELECT = "SELECT " + ", ".join(ITEM_COLUMNS) + " FROM memories"
_ITEM_INSERT = (
    "INSERT INTO memories ("
    + ", ".join(ITEM_COLUMNS)
    + ") VALUES ("
    + ", ".join("?" for _ in ITEM_COLUMNS)
    + ") RETURNING rowid"
)
_ITEM_UPDATE = (
    "UPDATE memories SET "
    + ", ".join(f"{c} = ?" for c in ITEM_COLUMNS[2:])
    + " WHERE tenant_id = ? AND id = ? AND version = ? RETURNING rowid"
)
_EVENT_COLUMNS = (
    "position, event_id, type, tenant_id, memory_id, subject_id, version, occurred_at, "
    "actor, idempotency_key, schema_version, payload"
)


def _stored(row: tuple[Any, ...]) -> StoredEvent:
    return StoredEvent(row[0], event_from_row(EventRow(*row[1:])))


def _statements(script: str) -> Iterator[str]:
    """Split a migration into complete statements (triggers contain semicolons)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer.strip()
            buffer = ""
    if buffer.strip() and not buffer.strip().startswith("--"):
        yield buffer.strip()


def migrations() -> list[tuple[int, str]]:
    """The numbered SQLite migrations shipped with the package, in order."""
    folder = resources.files("governed_memory.store.migrations").joinpath("sqlite")
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text("utf-8")))
    return sorted(found)


@dataclass
class _Pending:
    batch: Batch
    result: list[StoredEvent] = field(default_factory=list)
    error: BaseException | None = None
    done: bool = False


class SQLiteStore:
    """The store port over one SQLite database file."""

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout_ms: int = 10_000,
    ) -> None:
        self.path = Path(path)
        self.synchronous = synchronous
        self._busy_timeout_ms = busy_timeout_ms
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = self._connect()
        self._write_lock = threading.Lock()
        self._queue_lock = threading.Lock()
        self._queue: list[_Pending] = []
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._scope_ids: dict[tuple[str, str, str], int] = {}
        self._frequencies: dict[tuple[int, int], tuple[int, int]] = {}
        self._checkpoint_due = False  # a forget's WAL truncation still to finish
        self._closed = False
        self.migrate()

    @classmethod
    def in_directory(cls, directory: str | Path, **options: Any) -> SQLiteStore:
        """The store kept in ``directory/gmem.sqlite3``."""
        return cls(Path(directory) / DATABASE_FILE, **options)

    # -- connections ----------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_timeout_ms / 1000,
            )
        except sqlite3.Error as error:
            raise StoreUnavailable(
                f"cannot open the SQLite database: {type(error).__name__}"
            ) from None
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("PRAGMA foreign_keys = OFF")
        return conn

    def _reader(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreUnavailable("the store is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def migrate(self) -> list[int]:
        """Apply every migration not yet recorded, each in its own transaction."""
        conn = self._writer
        applied: list[int] = []
        with self._write_lock:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)"
            )
            for number, script in migrations():
                conn.execute("BEGIN IMMEDIATE")
                try:
                    done = conn.execute(
                        "SELECT 1 FROM schema_migrations WHERE version = ?", (number,)
                    ).fetchone()
                    if done is None:
                        for statement in _statements(script):
                            conn.execute(statement)
                        conn.execute(
                            "INSERT INTO schema_migrations VALUES (?, ?)",
                            (number, int(time.time() * 1_000_000)),
                        )
                        applied.append(number)
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
        return applied

    def schema_version(self) -> int:
        """The highest migration applied."""
        row = self._reader().execute("SELECT max(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        with self._write_lock:
            if self._checkpoint_due:
                self._checkpoint()  # a forget's pages must not stay in the WAL
            self._writer.close()

    def ping(self) -> None:
        try:
            self._reader().execute("SELECT 1 FROM schema_migrations LIMIT 1").fetchall()
        except sqlite3.Error as error:
            raise StoreUnavailable(f"SQLite is not answering: {type(error).__name__}") from None

    def checkpoint(self) -> bool:
        """Copy the WAL into the database and truncate it; True when the WAL is empty."""
        with self._write_lock:
            return self._checkpoint()

    def _checkpoint(self, attempts: int = 50) -> bool:
        """Truncate the WAL without ever waiting long for readers (the write lock is held).

        A reader's open transaction (an export's snapshot, say) pins the WAL; then the
        checkpoint is left due and tried again after later commits, until it succeeds.
        """
        conn = self._writer
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            for attempt in range(attempts):
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if busy == 0:
                    self._checkpoint_due = False
                    return True
                time.sleep(0.001 * (attempt + 1))
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        self._checkpoint_due = True
        return False

    # -- writes ---------------------------------------------------------------------------

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
        conn = self._writer
        new_scopes: dict[tuple[str, str, str], int] = {}
        single = len(group) == 1
        try:
            if self._closed:
                raise StoreUnavailable("the store is closed")
            conn.execute("BEGIN IMMEDIATE")
            for pending in group:
                if not single:
                    conn.execute("SAVEPOINT batch")
                # Scopes created by a batch are remembered only if the batch stands: a
                # rolled-back scope row's id would be reused for another scope.
                created: dict[tuple[str, str, str], int] = {}
                try:
                    scopes = ChainMap(created, new_scopes)  # writes land in ``created``
                    pending.result = self._apply(conn, pending.batch, scopes)
                except Exception as error:  # noqa: BLE001 - fails this batch alone
                    pending.error = _translate(error)
                    if not single:
                        conn.execute("ROLLBACK TO batch")
                else:
                    new_scopes.update(created)
                if not single:
                    conn.execute("RELEASE batch")
            if single and group[0].error is not None:
                conn.execute("ROLLBACK")
            else:
                conn.execute("COMMIT")
        except BaseException as error:  # the whole group failed to commit
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            failure = (
                _translate(error)
                if isinstance(error, Exception)
                else StoreUnavailable("the write was interrupted")
            )
            for pending in group:  # nobody is acknowledged for a transaction that failed
                pending.error, pending.result = pending.error or failure, []
            if not isinstance(error, Exception):
                raise
        else:
            self._scope_ids.update(new_scopes)
            if any(p.batch.destroy_key is not None and p.error is None for p in group):
                # Forget: push the purged pages out of the WAL so nothing lingers there.
                self._checkpoint()
            elif self._checkpoint_due:
                self._checkpoint(attempts=1)
        finally:
            for pending in group:
                pending.done = True

    def _apply(
        self,
        conn: sqlite3.Connection,
        batch: Batch,
        new_scopes: MutableMapping[tuple[str, str, str], int],
    ) -> list[StoredEvent]:
        tenant = batch.tenant_id
        if batch.idempotency is not None:
            record = self._idempotency(conn, tenant, batch.idempotency.key)
            if record is not None:
                raise IdempotencyKeyTaken(record)
        if batch.require_key is not None:
            key = batch.require_key
            row = conn.execute(
                "SELECT key_id FROM subject_keys WHERE tenant_id = ? AND subject_id = ?",
                (key.tenant_id, key.subject_id),
            ).fetchone()
            if row is None or bytes(row[0]) != key.key_id:
                raise SubjectKeyGone(f"a subject key of tenant {tenant!r} was destroyed")
        for change in batch.changes:
            rowid = self._write_item(conn, change)
            self._reindex(conn, change, rowid, new_scopes)
        stored = []
        for event in batch.events:
            row = event_row(event)
            (position,) = conn.execute(
                "INSERT INTO events (event_id, type, tenant_id, memory_id, subject_id, version, "
                "occurred_at, actor, idempotency_key, schema_version, payload) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING position",
                _event_values(row),
            ).fetchone()
            stored.append(StoredEvent(position, event))
        if batch.idempotency is not None:
            record = batch.idempotency
            conn.execute(
                "INSERT INTO idempotency (tenant_id, key, fingerprint, result, position) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    tenant,
                    record.key,
                    record.fingerprint,
                    json.dumps(dict(record.result), sort_keys=True),
                    stored[0].position if stored else None,
                ),
            )
        if batch.destroy_key is not None:
            left = conn.execute(
                "SELECT 1 FROM memories WHERE tenant_id = ? AND subject_id = ? "
                "AND status != 'deleted' LIMIT 1",
                (tenant, batch.destroy_key),
            ).fetchone()
            if left is not None:
                raise SubjectChanged(f"a subject of tenant {tenant!r} changed during forget")
            conn.execute(
                "DELETE FROM subject_keys WHERE tenant_id = ? AND subject_id = ?",
                (tenant, batch.destroy_key),
            )
        return stored

    def _write_item(self, conn: sqlite3.Connection, change: ItemChange) -> int:
        item = change.item
        row = item_row(item)
        if change.expected_version == 0:
            try:
                (rowid,) = conn.execute(_ITEM_INSERT, row).fetchone()
                return int(rowid)
            except sqlite3.IntegrityError:
                raise VersionConflict(item.id, 0, self._version(conn, item)) from None
        found = conn.execute(
            _ITEM_UPDATE, (*row[2:], item.tenant_id, item.id, change.expected_version)
        ).fetchone()
        if found is None:
            raise VersionConflict(item.id, change.expected_version, self._version(conn, item))
        return int(found[0])

    @staticmethod
    def _version(conn: sqlite3.Connection, item: ItemState) -> int:
        row = conn.execute(
            "SELECT version FROM memories WHERE tenant_id = ? AND id = ?",
            (item.tenant_id, item.id),
        ).fetchone()
        return 0 if row is None else int(row[0])

    def _scope_id(
        self,
        conn: sqlite3.Connection,
        item: ItemState,
        new_scopes: MutableMapping[tuple[str, str, str], int],
    ) -> int:
        key = (item.tenant_id, item.agent_id, item.purpose)
        known = self._scope_ids.get(key) or new_scopes.get(key)
        if known is not None:
            return known
        conn.execute(
            "INSERT INTO scopes (tenant_id, agent_id, purpose) VALUES (?, ?, ?) "
            "ON CONFLICT (tenant_id, agent_id, purpose) DO NOTHING",
            key,
        )
        (scope,) = conn.execute(
            "SELECT id FROM scopes WHERE tenant_id = ? AND agent_id = ? AND purpose = ?",
            key,
        ).fetchone()
        new_scopes[key] = int(scope)
        return int(scope)

    def _reindex(
        self,
        conn: sqlite3.Connection,
        change: ItemChange,
        rowid: int,
        new_scopes: MutableMapping[tuple[str, str, str], int],
    ) -> None:
        if change.expected_version != 0:
            old = conn.execute(
                "SELECT scope, length, terms FROM search_docs WHERE item = ?", (rowid,)
            ).fetchone()
            if old is not None:
                scope, length, packed = old
                terms = array("q")
                terms.frombytes(packed)
                conn.executemany(
                    "DELETE FROM postings WHERE scope = ? AND term = ? AND item = ?",
                    [(scope, term, rowid) for term in terms],
                )
                conn.execute("DELETE FROM search_docs WHERE item = ?", (rowid,))
                conn.execute(
                    "UPDATE scopes SET documents = documents - 1, total_length = total_length - ?, "
                    "generation = generation + 1 WHERE id = ?",
                    (length, scope),
                )
        index = change.index
        if index is None:
            return
        item = change.item
        updated_at, expires = to_micros(item.updated_at), to_micros(item.expires_at)
        kind = item.kind.value
        scope = self._scope_id(conn, item, new_scopes)
        conn.executemany(
            "INSERT INTO postings (scope, term, item, tf, length, confidence, updated_at, "
            "expires_at, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (scope, term, rowid, tf, index.length, item.confidence, updated_at, expires, kind)
                for term, tf in index.terms.items()
            ],
        )
        conn.execute(
            "INSERT INTO search_docs (item, scope, length, terms) VALUES (?, ?, ?, ?)",
            (rowid, scope, index.length, array("q", index.terms).tobytes()),
        )
        conn.execute(
            "UPDATE scopes SET documents = documents + 1, total_length = total_length + ?, "
            "generation = generation + 1 WHERE id = ?",
            (index.length, scope),
        )

    def add_subject_key(self, key: SubjectKey) -> SubjectKey:
        with self._write_lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT INTO subject_keys (tenant_id, subject_id, key_id, wrapped) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, subject_id) DO NOTHING",
                    (key.tenant_id, key.subject_id, key.key_id, key.wrapped),
                )
                conn.execute("COMMIT")
            except sqlite3.Error as error:
                conn.execute("ROLLBACK")
                raise StoreUnavailable(f"SQLite write failed: {type(error).__name__}") from None
        stored = self.subject_key(key.tenant_id, key.subject_id)
        assert stored is not None
        return stored

    # -- reads ----------------------------------------------------------------------------

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._reader().execute(sql, params).fetchall()
        except sqlite3.Error as error:
            raise StoreUnavailable(f"SQLite read failed: {type(error).__name__}") from None

    def get(self, tenant_id: str, memory_id: str) -> ItemState | None:
        rows = self._query(_ITEM_SELECT + " WHERE tenant_id = ? AND id = ?", (tenant_id, memory_id))
        return item_from_row(rows[0]) if rows else None

    def get_many(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, ItemState]:
        if not memory_ids:
            return {}
        marks = ", ".join("?" for _ in memory_ids)
        rows = self._query(
            _ITEM_SELECT + f" WHERE tenant_id = ? AND id IN ({marks})",
            (tenant_id, *memory_ids),
        )
        items = (item_from_row(row) for row in rows)
        return {item.id: item for item in items}

    def subject_items(self, tenant_id: str, subject_id: str) -> list[ItemState]:
        rows = self._query(
            _ITEM_SELECT + " WHERE tenant_id = ? AND subject_id = ? ORDER BY id",
            (tenant_id, subject_id),
        )
        return [item_from_row(row) for row in rows]

    def subject_key(self, tenant_id: str, subject_id: str) -> SubjectKey | None:
        rows = self._query(
            "SELECT key_id, wrapped FROM subject_keys WHERE tenant_id = ? AND subject_id = ?",
            (tenant_id, subject_id),
        )
        if not rows:
            return None
        return SubjectKey(tenant_id, subject_id, bytes(rows[0][0]), bytes(rows[0][1]))

    def subject_keys_for(self, tenant_id: str, subject_ids: Sequence[str]) -> dict[str, SubjectKey]:
        wanted = sorted(set(subject_ids))
        if not wanted:
            return {}
        rows = self._query(
            "SELECT subject_id, key_id, wrapped FROM subject_keys WHERE tenant_id = ? "
            f"AND subject_id IN ({', '.join('?' for _ in wanted)})",
            (tenant_id, *wanted),
        )
        return {s: SubjectKey(tenant_id, s, bytes(k), bytes(w)) for s, k, w in rows}

    @staticmethod
    def _idempotency(
        conn: sqlite3.Connection, tenant_id: str, key: str
    ) -> IdempotencyRecord | None:
        row = conn.execute(
            "SELECT fingerprint, result, position FROM idempotency WHERE tenant_id = ? AND key = ?",
            (tenant_id, key),
        ).fetchone()
        if row is None:
            return None
        return IdempotencyRecord(tenant_id, key, row[0], json.loads(row[1]), row[2])

    def idempotency(self, tenant_id: str, key: str) -> IdempotencyRecord | None:
        try:
            return self._idempotency(self._reader(), tenant_id, key)
        except sqlite3.Error as error:
            raise StoreUnavailable(f"SQLite read failed: {type(error).__name__}") from None

    def events_after(self, tenant_id: str | None, after: int, limit: int) -> list[StoredEvent]:
        if tenant_id is None:
            rows = self._query(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?",
                (after, limit),
            )
        else:
            rows = self._query(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE tenant_id = ? AND position > ? "
                "ORDER BY position LIMIT ?",
                (tenant_id, after, limit),
            )
        return [_stored(row) for row in rows]

    def memory_events(self, tenant_id: str, memory_id: str, subject_id: str) -> list[StoredEvent]:
        rows = self._query(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE tenant_id = ? AND memory_id = ? "
            f"UNION ALL SELECT {_EVENT_COLUMNS} FROM events WHERE tenant_id = ? "
            "AND subject_id = ? AND type = 'subject.forgotten' ORDER BY position",
            (tenant_id, memory_id, tenant_id, subject_id),
        )
        return [_stored(row) for row in rows]

    def due_for_expiry(self, now: datetime, limit: int) -> list[ItemState]:
        rows = self._query(
            _ITEM_SELECT + " WHERE status IN ('active', 'quarantined') AND expires_at <= ? "
            "ORDER BY expires_at LIMIT ?",
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
        sql = _ITEM_SELECT + " WHERE tenant_id = ? AND status = 'quarantined'"
        params: list[Any] = [tenant_id]
        if agents is not None:
            sql += f" AND agent_id IN ({', '.join('?' for _ in agents) or 'NULL'})"
            params += sorted(agents)
        if agent_id is not None:
            sql += " AND agent_id = ?"
            params.append(agent_id)
        if purpose is not None:
            sql += " AND purpose = ?"
            params.append(purpose)
        if after is not None:
            sql += " AND (updated_at, id) > (?, ?)"
            params += list(after)
        sql += " ORDER BY updated_at, id LIMIT ?"
        params.append(limit)
        return [item_from_row(row) for row in self._query(sql, params)]

    def search(self, request: SearchRequest) -> SearchMatches:
        scope_rows = self._query(
            "SELECT id, documents, total_length, generation FROM scopes "
            "WHERE tenant_id = ? AND agent_id = ? AND purpose = ?",
            (request.tenant_id, request.agent_id, request.purpose),
        )
        if not scope_rows or not request.terms:
            return SearchMatches(ScopeStatistics(0, 0, {}), [])
        scope, documents, total_length, generation = scope_rows[0]
        search = ScopedSearch(self._query, request, scope)
        terms = list(dict.fromkeys(request.terms))
        cached = [self._frequencies.get((scope, term)) for term in terms]
        known_large = (
            all(c is not None and c[0] == generation for c in cached)
            and sum(c[1] for c in cached if c is not None) > SMALL_SCOPE_POSTINGS
        )
        few = None if known_large else few_postings(self._query, scope, terms)
        if few is not None:
            counted = Counter(term for term, *_ in few)
            frequency = {term: counted[term] for term in request.terms}
            return search.run(ScopeStatistics(int(documents), int(total_length), frequency), few)
        frequency = {term: self._frequency(scope, generation, term) for term in request.terms}
        return search.run(ScopeStatistics(int(documents), int(total_length), frequency))

    def _frequency(self, scope: int, generation: int, term: int) -> int:
        """Document frequency, cached until the scope's postings change (its generation)."""
        key = (scope, term)
        cached = self._frequencies.get(key)
        if cached is not None and cached[0] == generation:
            return cached[1]
        count = document_frequency(self._query, scope, term)
        if len(self._frequencies) > 100_000:
            self._frequencies.clear()
        self._frequencies[key] = (generation, count)
        return count

    def explain(self, sql: str, params: Sequence[Any]) -> list[str]:
        """The query plan SQLite chooses (used by the tests that assert scoped access)."""
        return [row[3] for row in self._query("EXPLAIN QUERY PLAN " + sql, params)]

    # -- whole-log access -----------------------------------------------------------------

    def tenants(self) -> list[str]:
        rows = self._query("SELECT DISTINCT tenant_id FROM events ORDER BY tenant_id")
        return [row[0] for row in rows]

    def tenant_events(self, tenant_id: str) -> Iterator[StoredEvent]:
        return paged_events(self.events_after, tenant_id)

    def tenant_items(self, tenant_id: str) -> Iterator[ItemState]:
        rows = self._query(_ITEM_SELECT + " WHERE tenant_id = ? ORDER BY id", (tenant_id,))
        return (item_from_row(row) for row in rows)

    def head(self) -> int:
        (position,) = self._query("SELECT coalesce(max(position), 0) FROM events")[0]
        return int(position)

    def _transaction(self, work: Callable[[sqlite3.Connection], None]) -> None:
        """Run ``work`` in one write transaction (outside group commit, for admin paths)."""
        with self._write_lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                work(conn)
                conn.execute("COMMIT")
            except sqlite3.Error as error:
                conn.execute("ROLLBACK")
                raise StoreUnavailable(f"SQLite write failed: {type(error).__name__}") from None
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def import_events(self, events: Sequence[StoredEvent]) -> None:
        def work(conn: sqlite3.Connection) -> None:
            (head,) = conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()
            for stored in events:
                if stored.position <= head:
                    raise ValueError(
                        f"event position {stored.position} is not above the log head {head}"
                    )
                head = stored.position
                row = event_row(stored.event)
                conn.execute(
                    f"INSERT INTO events ({_EVENT_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (stored.position, *_event_values(row)),
                )

        self._transaction(work)

    def rebuild(self, tenant_id: str, changes: Sequence[ItemChange], through: int) -> None:
        """Replace the tenant's rows in bulk: a few statements, not a few per item."""

        def work(conn: sqlite3.Connection) -> None:
            (last,) = conn.execute(
                "SELECT coalesce(max(position), 0) FROM events WHERE tenant_id = ?", (tenant_id,)
            ).fetchone()
            if last != through:  # a write landed after the log was read: fold again
                raise LogMoved(f"tenant {tenant_id!r} has events after position {through}")
            scopes = conn.execute(
                "SELECT id, tenant_id, agent_id, purpose FROM scopes WHERE tenant_id = ?",
                (tenant_id,),
            ).fetchall()
            for scope, *_ in scopes:
                conn.execute("DELETE FROM postings WHERE scope = ?", (scope,))
            conn.execute(
                "DELETE FROM search_docs WHERE item IN "
                "(SELECT rowid FROM memories WHERE tenant_id = ?)",
                (tenant_id,),
            )
            conn.execute("DELETE FROM memories WHERE tenant_id = ?", (tenant_id,))
            ids = {(t, a, p): scope for scope, t, a, p in scopes}
            for change in changes:
                key = (tenant_id, change.item.agent_id, change.item.purpose)
                if change.index is not None and key not in ids:
                    conn.execute(
                        "INSERT INTO scopes (tenant_id, agent_id, purpose) VALUES (?, ?, ?)", key
                    )
                    ids[key] = conn.execute(
                        "SELECT id FROM scopes WHERE tenant_id = ? AND agent_id = ? "
                        "AND purpose = ?",
                        key,
                    ).fetchone()[0]
            (top,) = conn.execute("SELECT coalesce(max(rowid), 0) FROM memories").fetchone()
            rows: list[tuple[Any, ...]] = []
            docs: list[tuple[Any, ...]] = []
            postings: list[tuple[Any, ...]] = []
            totals: dict[int, list[int]] = {scope: [0, 0] for scope in ids.values()}
            for rowid, change in enumerate(changes, start=top + 1):
                item, index = change.item, change.index
                rows.append((rowid, *item_row(item)))
                if index is None:
                    continue
                scope = ids[(tenant_id, item.agent_id, item.purpose)]
                docs.append((rowid, scope, index.length, array("q", index.terms).tobytes()))
                totals[scope][0] += 1
                totals[scope][1] += index.length
                fixed = (
                    index.length,
                    item.confidence,
                    to_micros(item.updated_at),
                    to_micros(item.expires_at),
                    item.kind.value,
                )
                postings.extend((scope, t, rowid, tf, *fixed) for t, tf in index.terms.items())
            marks = ", ".join("?" for _ in range(len(ITEM_COLUMNS) + 1))
            conn.executemany(
                f"INSERT INTO memories (rowid, {', '.join(ITEM_COLUMNS)}) VALUES ({marks})", rows
            )
            conn.executemany("INSERT INTO search_docs VALUES (?, ?, ?, ?)", docs)
            postings.sort()  # in key order: each B-tree page is visited once
            conn.executemany(
                "INSERT INTO postings (scope, term, item, tf, length, confidence, updated_at, "
                "expires_at, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                postings,
            )
            conn.executemany(
                "UPDATE scopes SET documents = ?, total_length = ?, "
                "generation = generation + 1 WHERE id = ?",
                [(n, length, scope) for scope, (n, length) in totals.items()],
            )
            new_scopes.update(ids)

        new_scopes: dict[tuple[str, str, str], int] = {}
        self._transaction(work)
        self._scope_ids.update(new_scopes)  # only once the scope rows are committed

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction on this thread's connection: WAL gives it a fixed view."""
        conn = self._reader()
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT max(version) FROM schema_migrations").fetchall()  # pin it now
            yield
        finally:
            conn.execute("COMMIT")

    def subject_keys(self, limit: int | None = None) -> Iterator[SubjectKey]:
        rows = self._query(
            "SELECT tenant_id, subject_id, key_id, wrapped FROM subject_keys "
            "ORDER BY tenant_id, subject_id LIMIT ?",
            (-1 if limit is None else limit,),  # LIMIT -1 reads every row
        )
        return (SubjectKey(t, s, bytes(k), bytes(w)) for t, s, k, w in rows)

    def add_api_key(self, key: ApiKey) -> None:
        marks = ", ".join("?" for _ in API_KEY_COLUMNS)

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(
                f"INSERT INTO api_keys ({', '.join(API_KEY_COLUMNS)}) VALUES ({marks})",
                api_key_row(key),
            )

        self._transaction(work)

    def api_key(self, key_id: str, *, wait: bool = True) -> ApiKey | None:
        sql = f"SELECT {', '.join(API_KEY_COLUMNS)} FROM api_keys WHERE key_id = ?"
        if wait:
            rows = self._query(sql, (key_id,))
            return api_key_from_row(rows[0]) if rows else None
        # A WAL reader normally takes no lock, but can meet SQLITE_BUSY (recovery by
        # another process, an outside connection in exclusive mode): then refuse at once
        # rather than sleep through the busy timeout on the caller's event loop.
        conn = self._reader()
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            rows = conn.execute(sql, (key_id,)).fetchall()
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise ReadWouldWait("the database is busy") from None
            raise StoreUnavailable(f"SQLite read failed: {type(error).__name__}") from None
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        return api_key_from_row(rows[0]) if rows else None

    def api_keys(self, tenant_id: str | None = None) -> list[ApiKey]:
        sql = f"SELECT {', '.join(API_KEY_COLUMNS)} FROM api_keys"
        params: tuple[str, ...] = ()
        if tenant_id is not None:
            sql += " WHERE tenant_id = ?"
            params = (tenant_id,)
        rows = self._query(sql + " ORDER BY tenant_id, created_at, key_id", params)
        return [api_key_from_row(row) for row in rows]

    def revoke_api_key(self, key_id: str, at: datetime) -> bool:
        found: list[bool] = []

        def work(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE key_id = ?",
                (to_micros(at), key_id),
            )
            found.append(cursor.rowcount > 0)

        self._transaction(work)
        return found[0]


def _event_values(row: EventRow) -> tuple[Any, ...]:
    return (
        row.event_id,
        row.type,
        row.tenant_id,
        row.memory_id,
        row.subject_id,
        row.version,
        row.occurred_at,
        row.actor,
        row.idempotency_key,
        row.schema_version,
        row.payload,
    )


def _translate(error: Exception) -> Exception:
    """Domain errors pass through; driver errors become ``StoreUnavailable`` by class."""
    if isinstance(error, sqlite3.Error):
        return StoreUnavailable(f"SQLite write failed: {type(error).__name__}")
    return error
