"""The review console's sessions over a SQL database, written once for SQLite and
PostgreSQL (the statements differ only in their placeholder, the dialect's ``P``). Every
statement returns a column, as a backend's ``write`` reads the rows it returns.

A backend's store class derives from :class:`SQLSessions` beside
:class:`~governed_memory.store.sql_reads.SQLReads`, whose database and dialect it uses.
"""

from __future__ import annotations

from datetime import datetime

from governed_memory.core.values import from_micros, to_micros
from governed_memory.records import ConsoleSession
from governed_memory.store.sql_reads import Database, Dialect

_COLUMNS = "digest, key_id, key_check, started_at, last_seen"


class SQLSessions:
    """:class:`~governed_memory.ports.ConsoleSessions` over the ``console_sessions`` table."""

    _db: Database
    _sql: Dialect

    def add_console_session(self, session: ConsoleSession) -> None:
        p = self._sql.P
        self._db.write(
            f"INSERT INTO console_sessions ({_COLUMNS}) VALUES ({p}, {p}, {p}, {p}, {p})"
            " RETURNING digest",
            (
                session.digest,
                session.key_id,
                session.key_check,
                to_micros(session.started_at),
                to_micros(session.last_seen),
            ),
        )

    def console_session(self, digest: str) -> ConsoleSession | None:
        rows = self._db.query(
            f"SELECT {_COLUMNS} FROM console_sessions WHERE digest = {self._sql.P}", (digest,)
        )
        if not rows:
            return None
        digest, key_id, key_check, started_at, last_seen = rows[0]
        return ConsoleSession(
            digest, key_id, key_check, from_micros(started_at), from_micros(last_seen)
        )

    def touch_console_session(self, digest: str, at: datetime) -> None:
        p, micros = self._sql.P, to_micros(at)
        self._db.write(
            f"UPDATE console_sessions SET last_seen = {p} WHERE digest = {p} AND last_seen < {p}"
            " RETURNING digest",
            (micros, digest, micros),
        )

    def end_console_session(self, digest: str) -> None:
        self._db.write(
            f"DELETE FROM console_sessions WHERE digest = {self._sql.P} RETURNING digest",
            (digest,),
        )

    def end_idle_console_sessions(self, seen_before: datetime) -> int:
        rows = self._db.write(
            f"DELETE FROM console_sessions WHERE last_seen < {self._sql.P} RETURNING digest",
            (to_micros(seen_before),),
        )
        return len(rows)


__all__ = ["SQLSessions"]
