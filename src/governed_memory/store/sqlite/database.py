"""One SQLite database file: its connections, transactions, snapshot, WAL and migrations.

There is one writer connection, guarded by :attr:`SQLiteDatabase.write_lock` (which the
processes writing the file take turns on too, :mod:`.turns`), and one reader connection
per thread; WAL lets readers see committed state without blocking the
writer. Every connection gets the same PRAGMAs: WAL, the chosen ``synchronous`` level,
``secure_delete`` (deleted content is overwritten, not left in free pages) and the busy
timeout.

Opened ``read_only`` (the commands that only read: export, replay --verify, keys list),
every connection is ``mode=ro`` and nothing is migrated or written; on read-only media,
where SQLite cannot create the WAL's shared-memory file, a database whose WAL holds no
commits is opened ``immutable`` instead, which needs neither.

Driver errors become ``StoreUnavailable`` here, in :func:`unavailable`: by the error's
SQLite result code ("not a database", "read-only", "disk full"…), never with the driver's
message, which can quote data. Errors of opening also name the file; errors met while
serving do not, as they may reach an HTTP client.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import Any, Literal

from governed_memory.errors import ReadWouldWait, StoreUnavailable
from governed_memory.store.chain_links import CHAIN_MIGRATION, fill
from governed_memory.store.migrations import scripts
from governed_memory.store.sqlite import sql, wal
from governed_memory.store.sqlite.index_rows import IMPACT_MIGRATION, fill_documents
from governed_memory.store.sqlite.turns import WriteTurns

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

#: How long a purge left due waits before it is tried again without a commit.
PURGE_RETRY_SECONDS = 5.0


#: What a SQLite primary result code means, in words fit for an operator.
_REASONS = {
    sqlite3.SQLITE_NOTADB: "not a database",
    sqlite3.SQLITE_CORRUPT: "the database file is damaged",
    sqlite3.SQLITE_READONLY: "read-only (the file, its folder or the medium cannot be written)",
    sqlite3.SQLITE_CANTOPEN: "cannot open the file",
    sqlite3.SQLITE_PERM: "permission denied",
    sqlite3.SQLITE_AUTH: "permission denied",
    sqlite3.SQLITE_FULL: "disk full",
    sqlite3.SQLITE_IOERR: "input/output error",
    sqlite3.SQLITE_BUSY: "locked by another process",
    sqlite3.SQLITE_LOCKED: "locked",
    sqlite3.SQLITE_NOMEM: "out of memory",
    sqlite3.SQLITE_NOLFS: "the file is too large for this system",
}


def reason(error: sqlite3.Error) -> str:
    """Why a driver error happened, from its result code (never from its message)."""
    code: int | None = getattr(error, "sqlite_errorcode", None)
    if code is None:
        return type(error).__name__
    name = str(getattr(error, "sqlite_errorname", type(error).__name__))
    return _REASONS.get(code & 0xFF) or name


def unavailable(error: sqlite3.Error, doing: str) -> StoreUnavailable:
    """The domain error for a driver error met while ``doing``: its reason, no message."""
    return StoreUnavailable(f"{doing}: {reason(error)}")


def translate(error: Exception) -> Exception:
    """Domain errors pass through; driver errors become ``StoreUnavailable`` by class."""
    if isinstance(error, sqlite3.Error):
        return unavailable(error, "SQLite write failed")
    return error


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if any. On a full disk SQLite may have rolled it
    back itself when ``COMMIT`` failed; a ROLLBACK failing then must not replace the error
    being handled (which says why), so its own failure is dropped."""
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _busy(error: sqlite3.Error) -> bool:
    """Whether the error is SQLite's busy or locked (waiting might have answered)."""
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


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


def _fill_chain(conn: sqlite3.Connection) -> None:
    """Link the events stored before the chain existed (migration 8's transaction)."""
    rows = conn.execute(sql.UNCHAINED_EVENTS)
    fill(rows, lambda links: conn.executemany(sql.SET_CHAIN, links))


class SQLiteDatabase:
    """The connections to one database file, and the transactions run on them."""

    def __init__(
        self,
        path: Path,
        synchronous: Synchronous,
        busy_timeout_ms: int,
        *,
        read_only: bool = False,
    ) -> None:
        self.path = path
        self.synchronous = synchronous
        self.read_only = read_only
        self._deferring = False  # inside deferred_sync: a rebuild's commits skip the fsync
        self._busy_timeout_ms = busy_timeout_ms
        self._uri = self._read_only_uri() if read_only else None
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = self._connect()
        try:  # threads and processes take turns on it (a file beside the database, .turns)
            self.write_lock = WriteTurns(None if read_only else path, busy_timeout_ms / 1000)
        except BaseException:
            self.writer.close()
            raise
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self.checkpoint_due = False  # a forget's WAL truncation still to finish
        self._retry: threading.Timer | None = None  # the next try of a due purge
        self.closed = False

    def _opening(self, error: sqlite3.Error) -> StoreUnavailable:
        """An error of opening, naming the file; a folder SQLite cannot write its WAL in is
        said as such (SQLite reports only that it could not open the file)."""
        doing = f"cannot open the SQLite database {self.path}"
        folder = self.path.parent
        cannot_open = reason(error) == _REASONS[sqlite3.SQLITE_CANTOPEN]
        if cannot_open and self.path.exists() and not os.access(folder, os.W_OK):
            return StoreUnavailable(
                f"{doing}: its folder cannot be written (read-only media, or no permission), "
                "and SQLite needs to write its journal there; export, replay --verify and "
                "keys list only read, and work on it"
            )
        if cannot_open and not folder.is_dir():
            return StoreUnavailable(f"{doing}: its folder {folder} does not exist")
        return unavailable(error, doing)

    def _read_only_uri(self) -> str:
        """``mode=ro``, or ``immutable=1`` where read-only media keep SQLite from creating
        the WAL's shared memory; a WAL with commits not in the file yet cannot be read so."""
        if not self.path.is_file():
            raise StoreUnavailable(f"cannot open the SQLite database {self.path}: no such file")
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        try:
            with closing(sqlite3.connect(uri, uri=True)) as probe:  # reads the file's schema
                probe.execute("SELECT count(*) FROM sqlite_master").fetchall()
        except sqlite3.Error as error:
            if reason(error) != _REASONS[sqlite3.SQLITE_CANTOPEN]:
                raise self._opening(error) from None
            wal = self.path.with_name(self.path.name + "-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise StoreUnavailable(
                    f"cannot open the SQLite database {self.path} read-only: its write-ahead "
                    f"log {wal.name} holds commits SQLite cannot read on read-only media; copy "
                    "the folder to writable storage and run the command there"
                ) from None
            return f"{self.path.resolve().as_uri()}?immutable=1"
        return uri

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self._uri or self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_timeout_ms / 1000,
                uri=self._uri is not None,
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            if self._uri is None:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(f"PRAGMA synchronous = {self.synchronous}")
                conn.execute("PRAGMA secure_delete = ON")
            conn.execute("PRAGMA foreign_keys = OFF")
        except sqlite3.Error as error:
            raise self._opening(error) from None
        return conn

    def reader(self) -> sqlite3.Connection:
        """This thread's reader connection, opened on first use; inside :meth:`prompt`,
        its reader that never waits."""
        if self.closed:
            raise StoreUnavailable("the store is closed")
        if getattr(self._local, "prompting", False):
            return self.prompt_reader()
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._opened_reader()
            self._local.conn = conn
        return conn

    def prompt_reader(self) -> sqlite3.Connection:
        """This thread's reader that never waits (busy timeout 0), opened on first use.

        A connection of its own rather than the thread's reader with its busy timeout
        set to 0 and back around each read: those two statements cost more than the read
        (an API key's lookup, on every request)."""
        if self.closed:
            raise StoreUnavailable("the store is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "prompt", None)
        if conn is None:
            conn = self._opened_reader()
            conn.execute("PRAGMA busy_timeout = 0")
            self._local.prompt = conn
        return conn

    def _opened_reader(self) -> sqlite3.Connection:
        conn = self._connect()
        with self._readers_lock:
            self._readers.append(conn)
        return conn

    # -- reads ----------------------------------------------------------------------------

    @contextmanager
    def prompt(self) -> Iterator[None]:
        """Inside the block, this thread's reads (snapshots included) are made on its
        reader that never waits, and one the database cannot answer at once (busy or
        locked) raises ``ReadWouldWait`` instead of ``StoreUnavailable``: for reads made
        on an event loop, which must never sleep on a lock."""
        local = self._local
        local.prompting = True
        try:
            yield
        finally:
            local.prompting = False

    @property
    def prompting(self) -> bool:
        """Whether this thread is inside :meth:`prompt`."""
        return bool(getattr(self._local, "prompting", False))

    def _failed(self, error: sqlite3.Error, doing: str) -> Exception:
        """The domain error for a read's driver error: inside :meth:`prompt`, a busy or
        locked database is ``ReadWouldWait`` (asked again where waiting is allowed)."""
        if self.prompting and _busy(error):
            return ReadWouldWait("the database is busy")
        return unavailable(error, doing)

    def query(self, sql: str, params: Sequence[Any] = (), *, wait: bool = True) -> list[Any]:
        """The rows of one read on this thread's reader (inside its snapshot, if open)."""
        if not wait:
            return self._query_now(sql, params)
        try:
            return self.reader().execute(sql, params).fetchall()
        except sqlite3.Error as error:
            raise self._failed(error, "SQLite read failed") from None

    def query_pages(self, sql: str, params: Sequence[Any] = (), size: int = 8192) -> Iterator[Any]:
        """The rows of one read on this thread's reader, ``size`` at a time: a long read
        without every row held at once."""
        try:
            cursor = self.reader().execute(sql, params)
            while rows := cursor.fetchmany(size):
                yield rows
        except sqlite3.Error as error:
            raise self._failed(error, "SQLite read failed") from None

    def _query_now(self, sql: str, params: Sequence[Any]) -> list[Any]:
        # A WAL reader normally takes no lock, but can meet SQLITE_BUSY (recovery by
        # another process, an outside connection in exclusive mode): then refuse at once
        # rather than sleep through the busy timeout on the caller's event loop.
        own: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if own is not None and own.in_transaction:  # in this thread's snapshot: read it
            own.execute("PRAGMA busy_timeout = 0")
            try:
                return self._prompt_query(own, sql, params)
            finally:
                own.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        return self._prompt_query(self.prompt_reader(), sql, params)

    @staticmethod
    def _prompt_query(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[Any]:
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as error:
            if _busy(error):
                raise ReadWouldWait("the database is busy") from None
            raise unavailable(error, "SQLite read failed") from None

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction on this thread's connection: WAL gives it a fixed view.
        Inside this thread's snapshot on the same connection already, the reads share it
        (it ends with it)."""
        conn = self.reader()
        if getattr(self._local, "snapshot", None) is conn:
            yield
            return
        try:
            conn.execute("BEGIN")
            conn.execute("SELECT max(version) FROM schema_migrations").fetchall()  # pin it now
        except sqlite3.Error as error:
            rollback(conn)
            raise self._failed(error, "SQLite read failed") from None
        self._local.snapshot = conn
        try:
            yield
        finally:
            self._local.snapshot = None
            conn.execute("COMMIT")

    def ping(self) -> None:
        try:
            self.reader().execute(sql.PING).fetchall()
        except sqlite3.Error as error:
            raise unavailable(error, "SQLite is not answering") from None

    # -- writes outside group commit ------------------------------------------------------

    @contextmanager
    def deferred_sync(self) -> Iterator[None]:
        """Inside the block, a ``write_transaction(deferred=True)`` (a rebuild's) commits
        without its fsync (``synchronous = NORMAL``, consistent in WAL mode); when the
        block ends the write-ahead log is synced once, so those commits are as durable as
        configured. Every other commit meanwhile (group commit, admin writes) keeps its
        own fsync, and syncs the log with it."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
            with self.write_lock.threads:  # an fsync of the file: no other process's turn
                self._sync_log()

    def _sync_log(self) -> None:
        """fsync the write-ahead log (every frame committed so far becomes durable)."""
        try:
            descriptor = os.open(f"{self.path}-wal", os.O_RDONLY)
        except FileNotFoundError:
            return  # checkpointed and truncated: nothing left unsynced in it
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    @contextmanager
    def write_transaction(self, *, deferred: bool = False) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction on the writer, holding the write lock
        (admin and bulk paths; batches go through group commit). It commits when the
        block ends and rolls back if it raises; a driver error becomes ``StoreUnavailable``.
        ``deferred``: inside :meth:`deferred_sync`, commit without the fsync.
        """
        relaxed = deferred and self._deferring and self.synchronous in ("FULL", "EXTRA")
        with self.write_lock:
            conn = self.writer
            if relaxed:
                conn.execute("PRAGMA synchronous = NORMAL")
            try:
                conn.execute("BEGIN IMMEDIATE")
                yield conn
                conn.execute("COMMIT")
            except sqlite3.Error as error:
                rollback(conn)
                raise unavailable(error, "SQLite write failed") from None
            except BaseException:
                rollback(conn)
                raise
            finally:
                if relaxed:
                    conn.execute(f"PRAGMA synchronous = {self.synchronous}")

    def write(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """One statement in a write transaction of its own; the rows it returns."""
        with self.write_transaction() as conn:
            return conn.execute(sql, params).fetchall()

    # -- the WAL --------------------------------------------------------------------------

    def checkpoint(self, attempts: int = 50) -> bool:
        """Purge the WAL: copy it into the database file and truncate it, without ever
        waiting long for readers (hold the write lock). True when the WAL file is empty.

        A reader's open transaction (an export's snapshot, say) pins the WAL, and a full
        disk fails the copy: then the purge is left due and tried again after later
        commits, every :data:`PURGE_RETRY_SECONDS` and at close; the batch that destroyed
        a key has recorded it in ``store_meta`` as well, for the next open (:mod:`.wal`).
        Never raises: the forget that asked has committed.
        """
        conn = self.writer
        try:
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                done = wal.truncate(conn, self._wal, attempts)
            finally:
                conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        except sqlite3.Error:  # disk full, I/O error: the purge stays due
            done = False
        self.checkpoint_due = not done
        if not done:
            self._retry_later()
        return done

    def _retry_later(self) -> None:
        """Try a due purge again in a few seconds, even if nothing commits meanwhile (an
        idle server whose disk has room again, a reader that has ended)."""
        if self._retry is None and not self.closed:
            self._retry = threading.Timer(PURGE_RETRY_SECONDS, self._retry_now)
            self._retry.daemon = True
            self._retry.start()

    def _retry_now(self) -> None:
        try:
            with self.write_lock:
                self._retry = None
                if self.checkpoint_due and not self.closed:
                    self.checkpoint(attempts=1)  # still due: tried again later
        except StoreUnavailable:  # another process kept the file past the busy timeout
            with self.write_lock.threads:
                self._retry = None
            self._retry_later()

    def resume_purge(self, attempts: int = 100) -> bool:
        """At open, before serving: finish a purge recorded by a batch that destroyed a
        key (a crash or a full disk may have kept it from finishing), then remove the
        record. Retried for about five seconds while readers pin the WAL; still due after
        that, it is retried after every commit and the record stays. True when none is
        due."""
        with self.write_lock:
            try:
                if not wal.purge_recorded(self.writer):
                    return True
            except sqlite3.Error as error:
                raise self._opening(error) from None
            if not self.checkpoint(attempts):
                return False
            wal.forget_purge(self.writer, self._wal)
            return True

    @property
    def _wal(self) -> Path:
        return self.path.with_name(self.path.name + "-wal")

    # -- life cycle -----------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply every migration not yet recorded, each in its own transaction; opened
        read-only, only check that none is pending."""
        try:
            return self._check_migrated() if self.read_only else self._migrate()
        except sqlite3.Error as error:
            raise self._opening(error) from None

    def _check_migrated(self) -> list[int]:
        rows = self.writer.execute("SELECT version FROM schema_migrations").fetchall()
        pending = {number for number, _ in scripts("sqlite")} - {row[0] for row in rows}
        if pending:
            raise StoreUnavailable(
                f"the SQLite database {self.path} needs migration {min(pending)} and is opened "
                "read-only: run the command on a writable copy"
            )
        return []

    def _migrate(self) -> list[int]:
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
                        if number == CHAIN_MIGRATION:
                            _fill_chain(conn)
                        if number == IMPACT_MIGRATION:
                            fill_documents(conn)
                        conn.execute(
                            "INSERT INTO schema_migrations VALUES (?, ?)",
                            (number, int(time.time() * 1_000_000)),
                        )
                        applied.append(number)
                    conn.execute("COMMIT")
                except BaseException:
                    rollback(conn)
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
        with self.write_lock.threads:
            if self._retry is not None:
                self._retry.cancel()
        if self.checkpoint_due:
            # A forget's pages must not stay in the WAL. If another process keeps the file
            # past the busy timeout, the purge stays recorded for the next open (.wal).
            with suppress(StoreUnavailable), self.write_lock:
                self.checkpoint()
        with self.write_lock.threads:
            self.writer.close()
        self.write_lock.close()


__all__ = [
    "SQLiteDatabase",
    "Synchronous",
    "reason",
    "rollback",
    "translate",
    "unavailable",
]
