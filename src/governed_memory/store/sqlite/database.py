"""One SQLite database file: its connections, transactions, snapshot, WAL and migrations.

There is one writer connection, guarded by :attr:`SQLiteDatabase.write_lock`, and one
reader connection per thread; WAL lets readers see committed state without blocking the
writer. Every connection gets the same PRAGMAs: WAL, the chosen ``synchronous`` level,
``secure_delete`` (deleted content is overwritten, not left in free pages) and the busy
timeout. Driver errors become ``StoreUnavailable`` here, in
:func:`unavailable`, by class and never with the driver's message.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from governed_memory.errors import ReadWouldWait, StoreUnavailable
from governed_memory.store.migrations import scripts
from governed_memory.store.sqlite import sql

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


def unavailable(error: sqlite3.Error, doing: str) -> StoreUnavailable:
    """The domain error for a driver error met while ``doing`` (its class name only)."""
    return StoreUnavailable(f"{doing}: {type(error).__name__}")


def translate(error: Exception) -> Exception:
    """Domain errors pass through; driver errors become ``StoreUnavailable`` by class."""
    if isinstance(error, sqlite3.Error):
        return unavailable(error, "SQLite write failed")
    return error


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


class SQLiteDatabase:
    """The connections to one database file, and the transactions run on them."""

    def __init__(self, path: Path, synchronous: Synchronous, busy_timeout_ms: int) -> None:
        self.path = path
        self.synchronous = synchronous
        self._busy_timeout_ms = busy_timeout_ms
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = self._connect()
        self.write_lock = threading.Lock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self.checkpoint_due = False  # a forget's WAL truncation still to finish
        self.closed = False

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_timeout_ms / 1000,
            )
        except sqlite3.Error as error:
            raise unavailable(error, "cannot open the SQLite database") from None
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("PRAGMA foreign_keys = OFF")
        return conn

    def reader(self) -> sqlite3.Connection:
        """This thread's reader connection, opened on first use."""
        if self.closed:
            raise StoreUnavailable("the store is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    # -- reads ----------------------------------------------------------------------------

    def query(self, sql: str, params: Sequence[Any] = (), *, wait: bool = True) -> list[Any]:
        """The rows of one read on this thread's reader (inside its snapshot, if open)."""
        if not wait:
            return self._query_now(sql, params)
        try:
            return self.reader().execute(sql, params).fetchall()
        except sqlite3.Error as error:
            raise unavailable(error, "SQLite read failed") from None

    def _query_now(self, sql: str, params: Sequence[Any]) -> list[Any]:
        # A WAL reader normally takes no lock, but can meet SQLITE_BUSY (recovery by
        # another process, an outside connection in exclusive mode): then refuse at once
        # rather than sleep through the busy timeout on the caller's event loop.
        conn = self.reader()
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise ReadWouldWait("the database is busy") from None
            raise unavailable(error, "SQLite read failed") from None
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction on this thread's connection: WAL gives it a fixed view."""
        conn = self.reader()
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT max(version) FROM schema_migrations").fetchall()  # pin it now
            yield
        finally:
            conn.execute("COMMIT")

    def ping(self) -> None:
        try:
            self.reader().execute(sql.PING).fetchall()
        except sqlite3.Error as error:
            raise unavailable(error, "SQLite is not answering") from None

    # -- writes outside group commit ------------------------------------------------------

    @contextmanager
    def write_transaction(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction on the writer, holding the write lock
        (admin and bulk paths; batches go through group commit). It commits when the
        block ends and rolls back if it raises; a driver error becomes ``StoreUnavailable``.
        """
        with self.write_lock:
            conn = self.writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except sqlite3.Error as error:
                conn.execute("ROLLBACK")
                raise unavailable(error, "SQLite write failed") from None
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def write(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """One statement in a write transaction of its own; the rows it returns."""
        with self.write_transaction() as conn:
            return conn.execute(sql, params).fetchall()

    # -- the WAL --------------------------------------------------------------------------

    def checkpoint(self, attempts: int = 50) -> bool:
        """Truncate the WAL without ever waiting long for readers (hold the write lock).

        A reader's open transaction (an export's snapshot, say) pins the WAL; then the
        checkpoint is left due and tried again after later commits, until it succeeds.
        True when the WAL is empty.
        """
        conn = self.writer
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            for attempt in range(attempts):
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if busy == 0:
                    self.checkpoint_due = False
                    return True
                time.sleep(0.001 * (attempt + 1))
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        self.checkpoint_due = True
        return False

    # -- life cycle -----------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply every migration not yet recorded, each in its own transaction."""
        conn = self.writer
        applied: list[int] = []
        with self.write_lock:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)"
            )
            for number, script in scripts("sqlite"):
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

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        with self.write_lock:
            if self.checkpoint_due:
                self.checkpoint()  # a forget's pages must not stay in the WAL
            self.writer.close()


__all__ = ["SQLiteDatabase", "Synchronous", "translate", "unavailable"]
