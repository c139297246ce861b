"""One PostgreSQL database (or one schema in it): the pool, snapshots, locks and migrations.

Connections come from a pool, in autocommit mode, each pointed at the store's schema. A
snapshot pins one connection to this thread for the length of a REPEATABLE READ, read-only
transaction, and every read of the thread goes to it. Driver and pool errors become
``StoreUnavailable`` in one place, :func:`translate`, by class, never by message. Before
the pool opens, :func:`.probe.probe` connects once, so a wrong URL fails at once with its
cause instead of after the pool's timeout.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import IsolationLevel
from psycopg import sql as pgsql
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from governed_memory.errors import ReadWouldWait, StoreUnavailable
from governed_memory.store.chain_links import CHAIN_MIGRATION, fill
from governed_memory.store.migrations import scripts
from governed_memory.store.postgres import sql
from governed_memory.store.postgres.probe import probe

Connection = psycopg.Connection[TupleRow]
Params = Sequence[Any] | Mapping[str, Any]

# The high half of every advisory lock key this package takes ("gmem"), so that its locks
# do not collide with those of other applications sharing the database.
_LOCK_SPACE = 0x676D656D


def lock_key(low: int) -> int:
    """A signed 64-bit advisory lock key in this package's space."""
    return (_LOCK_SPACE << 32) | (low & 0xFFFFFFFF)


def _name_hash(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=4).digest(), "big")


def translate(error: Exception) -> Exception:
    """Domain errors pass through; driver and pool errors become ``StoreUnavailable``.

    By class: connection failures and pool timeouts are ``OperationalError``s, and any
    other driver error that reaches here is a failure of the store too. The message names
    the class only, never the driver's message, which may quote values.
    """
    if isinstance(error, psycopg.Error):
        return StoreUnavailable(f"PostgreSQL failed: {type(error).__name__}")
    return error


class PostgresDatabase:
    """The pool of connections to one database, and the transactions run on them."""

    def __init__(
        self, dsn: str, *, schema: str | None, min_size: int, max_size: int, timeout: float
    ) -> None:
        self.schema = schema
        self._schema_sql = pgsql.Identifier(schema) if schema is not None else None
        self.write_lock = threading.Lock()
        self.closed = False
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
            probe(dsn, timeout)  # a wrong URL fails now, with its cause, not as PoolTimeout
            self._pool.open(wait=True, timeout=timeout)
            self.migrate()
            (oid,) = self.query("SELECT 'events'::regclass::oid::bigint")[0]
            self.log_lock = lock_key(int(oid))  # one write lock per events table
        except psycopg.Error as error:
            self._pool.close()
            raise translate(error) from None
        except BaseException:
            self._pool.close()
            raise

    def _configure(self, conn: Connection) -> None:
        """Point a new connection at the store's schema (``None``: the server's default)."""
        if self._schema_sql is not None:
            conn.execute(pgsql.SQL("SET search_path TO {}").format(self._schema_sql))

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A connection of the pool for the block; driver errors become domain errors."""
        if self.closed:
            raise StoreUnavailable("the store is closed")
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as error:
            raise translate(error) from None

    # -- reads ----------------------------------------------------------------------------

    def query(self, query: str, params: Params = (), *, wait: bool = True) -> list[Any]:
        """The rows of one read, on this thread's snapshot connection if one is pinned."""
        if not wait:
            raise ReadWouldWait("a PostgreSQL read is a network round trip")
        pinned: Connection | None = getattr(self._pinned, "conn", None)
        if pinned is not None:
            try:
                return pinned.execute(query, params).fetchall()
            except psycopg.Error as error:
                raise translate(error) from None
        with self.connection() as conn:
            return conn.execute(query, params).fetchall()

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """This thread's reads share one REPEATABLE READ, read-only transaction."""
        with self.connection() as conn:
            # Set on the connection, the isolation and read-only mode go out with the
            # transaction's BEGIN: one round trip, not a BEGIN and a SET TRANSACTION.
            conn.isolation_level, conn.read_only = IsolationLevel.REPEATABLE_READ, True
            try:
                with conn.transaction():
                    self._pinned.conn = conn
                    try:
                        yield
                    finally:
                        self._pinned.conn = None
            finally:
                conn.isolation_level, conn.read_only = None, None

    def ping(self) -> None:
        self.query(sql.PING)

    # -- writes outside group commit ------------------------------------------------------

    def write(self, query: str, params: Params) -> list[Any]:
        """One autocommitted statement (API-key admin); the rows it returns."""
        with self.connection() as conn:
            return conn.execute(query, params).fetchall()

    @contextmanager
    def write_transaction(self) -> Iterator[Connection]:
        """One write transaction holding the log's write lock (admin and bulk paths,
        outside grouping; see :meth:`.batch.PostgresBatches.lock` for why the lock)."""
        with self.connection() as conn, conn.transaction():
            conn.execute(sql.LOCK_LOG, (self.log_lock,))
            yield conn

    # -- life cycle -----------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply every migration not yet recorded, in one transaction.

        A transaction-level advisory lock (keyed by the schema) makes a second instance
        starting at the same moment wait, then find the migrations recorded and apply none.
        """
        applied: list[int] = []
        with self.connection() as conn, conn.transaction():
            key = lock_key(_name_hash("migrate:" + (self.schema or "")))
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
            if self._schema_sql is not None:
                conn.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(self._schema_sql))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            for number, script in scripts("postgres"):
                if number in done:
                    continue
                conn.execute(script.encode("utf-8"))
                if number == CHAIN_MIGRATION:
                    _fill_chain(conn)
                conn.execute(
                    "INSERT INTO schema_migrations VALUES "
                    "(%s, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)",
                    (number,),
                )
                applied.append(number)
        return applied

    def drop_schema(self) -> None:
        """Drop the store's schema and everything in it (tests use one schema per run)."""
        if self._schema_sql is None:
            raise ValueError("drop_schema needs a store opened with an explicit schema")
        with self.connection() as conn:
            conn.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(self._schema_sql))

    def close(self) -> None:
        if self.closed:
            return
        with self.write_lock:
            self.closed = True
            self._pool.close()


def _fill_chain(conn: Connection) -> None:
    """Link the events stored before the chain existed (migration 8's transaction)."""
    with conn.cursor(name="gm_fill_chain") as rows, conn.cursor() as writer:
        rows.execute(sql.UNCHAINED_EVENTS)
        fill(rows, lambda links: writer.executemany(sql.SET_CHAIN, links))


__all__ = ["Connection", "PostgresDatabase", "lock_key", "translate"]
