"""A write transaction in one message to the server: libpq's pipeline, driven directly.

psycopg's pipeline sends each statement as soon as it is executed (a ``send`` on the
socket, a poll, a cursor and its bookkeeping each time), so the write's ``BEGIN``, lock,
statement and ``COMMIT`` cost four exchanges with the kernel and about 45 µs of Python
apiece (docs/benchmarks.md item 6). Here a batch's statements are queued in libpq's
output buffer and go out together, with one ``Sync``, in one write to the socket; the
results are read back once the server has answered them all.

Without ``BEGIN`` and ``COMMIT``: in the extended protocol, every statement up to a
``Sync`` runs in one implicit transaction, committed (durably, at the server's
``synchronous_commit``) when the ``Sync`` is processed, and rolled back entirely if any
statement fails; the statements after a failed one are skipped. The first statement
takes the write lock (a transaction-level advisory lock, held until that commit), and
every later statement takes its snapshot after it, as in an explicit transaction under
READ COMMITTED. psycopg's own pipeline could not be used that way: it sends a ``Sync``
whenever it needs results, which would commit half a batch; here the only ``Sync`` is
the last message.

Each statement is prepared once per connection, in the same message as its first
execution, under a name of its own (``gm_w…``, apart from psycopg's ``_pg3_…``). psycopg
may drop every prepared statement of a connection (``DEALLOCATE ALL`` after a rollback of
its own): a batch that then names a statement the server no longer has fails before
anything commits, and is sent again with its statements prepared anew.
"""

from __future__ import annotations

import re
import select
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer

from governed_memory.store.postgres.database import Connection

#: A statement with its parameters: ``%(name)s`` ones with a mapping, ``%s`` ones with a
#: sequence.
Statement = tuple[str, Mapping[str, Any] | Sequence[Any]]
#: At most this many statements are kept prepared on one connection by this module;
#: beyond, a new one is sent unnamed (parsed and planned by the server each time).
MAX_PREPARED = 200

_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%s|%%")
_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)


class _Compiled:
    """A statement in libpq's form (``$1``…), with the names of its parameters in order
    (``None`` for positional parameters)."""

    __slots__ = ("names", "query")

    def __init__(self, query: str) -> None:
        names: list[str] = []
        positional = 0

        def number(match: re.Match[str]) -> str:
            nonlocal positional
            name = match.group(1)
            if match.group(0) == "%%":
                return "%"
            if name is None:
                positional += 1
                return f"${positional}"
            if name not in names:
                names.append(name)
            return f"${names.index(name) + 1}"

        text = _PLACEHOLDER.sub(number, query)
        if names and positional:
            raise ValueError("a statement mixes named and positional parameters")
        self.query = text.encode("utf-8")
        self.names: tuple[str, ...] | None = tuple(names) if names else None


class _Session:
    """What this module knows of one connection: its prepared statements and dumpers."""

    __slots__ = ("just_prepared", "prepared", "transformer")

    def __init__(self, conn: Connection) -> None:
        self.prepared: set[bytes] = set()
        # Those prepared by the last message (a prepared statement outlives the
        # transaction it was prepared in, committed or not).
        self.just_prepared: set[bytes] = set()
        self.transformer = Transformer(conn)


_compiled: dict[str, _Compiled] = {}
_names: dict[tuple[bytes, tuple[int, ...]], bytes] = {}
_names_lock = threading.Lock()
_sessions: weakref.WeakKeyDictionary[Connection, _Session] = weakref.WeakKeyDictionary()


def _compile(query: str) -> _Compiled:
    compiled = _compiled.get(query)
    if compiled is None:
        compiled = _compiled[query] = _Compiled(query)
    return compiled


def _name(query: bytes, types: tuple[int, ...]) -> bytes:
    """The name of a statement prepared with these parameter types (one per process)."""
    key = (query, types)
    name = _names.get(key)
    if name is None:
        with _names_lock:
            name = _names.setdefault(key, b"gm_w%d" % len(_names))
    return name


def run(conn: Connection, statements: Sequence[Statement]) -> list[pq.abc.PGresult]:
    """Run ``statements`` in one implicit transaction, sent in one message; each one's
    result (its rows, if it returns any). A failed statement's error is raised (nothing
    committed); so is a driver error, after which the connection is closed (the pool
    discards it), since its protocol state is then unknown."""
    session = _sessions.get(conn)
    if session is None:
        session = _sessions[conn] = _Session(conn)
    try:
        return _exchange(conn, session, statements)
    except psycopg.errors.InvalidSqlStatementName:
        # Deallocated behind this module's back: all but those the failed message
        # prepared itself are prepared again.
        session.prepared = set(session.just_prepared)
        return _exchange(conn, session, statements)


def _exchange(
    conn: Connection, session: _Session, statements: Sequence[Statement]
) -> list[pq.abc.PGresult]:
    pgconn = conn.pgconn
    tx = session.transformer
    # Per statement: the name it is prepared under in this message, else None.
    preparing: list[bytes | None] = []
    session.just_prepared.clear()
    pgconn.enter_pipeline_mode()
    try:
        for query, params in statements:
            compiled = _compile(query)
            if compiled.names is None:
                values: Sequence[Any] = params  # type: ignore[assignment]
            else:
                values = [params[n] for n in compiled.names]  # type: ignore[call-overload]
            dumped = tx.dump_sequence(values, [PyFormat.AUTO] * len(values))
            types = tx.types or ()
            formats = tx.formats
            name = _name(compiled.query, types)
            if name in session.prepared or name in preparing:  # or earlier in this message
                preparing.append(None)
            elif len(session.prepared) < MAX_PREPARED:
                pgconn.send_prepare(name, compiled.query, param_types=types)
                preparing.append(name)
            else:
                pgconn.send_query_params(
                    compiled.query, dumped, param_types=types, param_formats=formats
                )
                preparing.append(None)
                continue
            pgconn.send_query_prepared(name, dumped, param_formats=formats)
        pgconn.pipeline_sync()
        results = _results(pgconn, session, preparing)
        pgconn.exit_pipeline_mode()
    except BaseException:
        conn.close()  # the protocol state is unknown: the pool discards a closed connection
        raise
    failed = next((r for r in results if r.status not in _OK), None)
    if failed is not None:
        raise psycopg.errors.error_from_result(failed, encoding=conn.info.encoding)
    return results


def _results(
    pgconn: pq.abc.PGconn,
    session: _Session,
    preparing: list[bytes | None],
) -> list[pq.abc.PGresult]:
    """Flush the queued messages, then read every result up to the ``Sync``'s; the first
    failure stands for a statement whose ``Parse`` failed (it is then not executed)."""
    poll = select.poll()
    # While libpq cannot send it all, read what the server answers meanwhile (libpq's own
    # rule for a non-blocking flush): a server blocked writing its answers stops reading.
    poll.register(pgconn.socket, select.POLLOUT | select.POLLIN)
    while pgconn.flush():
        if any(events & select.POLLIN for _, events in poll.poll()):
            pgconn.consume_input()
    poll.modify(pgconn.socket, select.POLLIN)

    def result() -> pq.abc.PGresult | None:
        while pgconn.is_busy():
            poll.poll()
            pgconn.consume_input()
        return pgconn.get_result()

    results: list[pq.abc.PGresult] = []
    for name in preparing:
        if name is not None:
            prepared = _one(result)
            if prepared.status == pq.ExecStatus.COMMAND_OK:
                session.prepared.add(name)
                session.just_prepared.add(name)
            elif prepared.status == pq.ExecStatus.FATAL_ERROR:
                _one(result)  # the execution, skipped
                results.append(prepared)
                continue
        results.append(_one(result))
    sync = result()
    if sync is None or sync.status != pq.ExecStatus.PIPELINE_SYNC:
        raise psycopg.OperationalError("the server's answers ended before its Sync")
    return results


def _one(result: Any) -> pq.abc.PGresult:
    """The result of one queued command, and the end of its results (``None``)."""
    first = result()
    if first is None or result() is not None:
        raise psycopg.OperationalError("a queued command had not one result")
    return first  # type: ignore[no-any-return]


__all__ = ["MAX_PREPARED", "Statement", "run"]
