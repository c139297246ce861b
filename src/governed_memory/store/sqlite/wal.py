"""Purging SQLite's write-ahead log after a key is destroyed (forget, erase, retention).

A destroyed key's row is overwritten in place (``secure_delete``), but the WAL still holds
the pages written before, key included, until a checkpoint copies the WAL into the
database file and truncates it. That purge is made durable: the batch that destroys a key
records it in ``store_meta`` (:data:`PURGE_DUE`) in its own transaction, so no crash can
separate the two; a checkpoint that leaves the WAL file empty removes the record; and a
store opened with the record set purges before anything else (see
:meth:`.database.SQLiteDatabase.resume_purge`).
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import suppress
from pathlib import Path

from governed_memory.store.sqlite import sql

#: The ``store_meta`` row recording a purge of the WAL still to do.
PURGE_DUE = "wal_purge_due"


def truncate(conn: sqlite3.Connection, wal: Path, attempts: int) -> bool:
    """``wal_checkpoint(TRUNCATE)`` until no reader keeps it from finishing (the caller
    sets a busy timeout of 0); True when it finished and the ``wal`` file is verified
    empty. A disk error raises."""
    for attempt in range(attempts):
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy == 0:
            return _size(wal) == 0
        if attempt + 1 < attempts:
            time.sleep(0.001 * (attempt + 1))
    return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def purge_recorded(conn: sqlite3.Connection) -> bool:
    """Whether a purge is recorded as due."""
    return conn.execute(sql.GET_META, (PURGE_DUE,)).fetchone() is not None


def forget_purge(conn: sqlite3.Connection) -> None:
    """Remove the record of a purge now done, and truncate the WAL that removal wrote (it
    holds no destroyed key). If this fails the record stays, and the next open truncates
    an empty WAL once more: harmless."""
    with suppress(sqlite3.Error):
        if purge_recorded(conn):
            conn.execute(sql.DELETE_META, (PURGE_DUE,))
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


__all__ = ["PURGE_DUE", "forget_purge", "purge_recorded", "truncate"]
