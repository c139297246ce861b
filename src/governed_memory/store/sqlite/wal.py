"""Purging SQLite's write-ahead log after a key is destroyed (forget, erase, retention).

A destroyed key's row is overwritten in place (``secure_delete``), but the WAL still holds
the pages written before, key included, until a checkpoint copies the WAL into the
database file and truncates it. That purge is made durable: the batch that destroys a key
records it in ``store_meta`` (:data:`PURGE_DUE`) in its own transaction, so no crash can
separate the two, and a store opened with the record set purges before anything else,
then removes the record (:meth:`.database.SQLiteDatabase.resume_purge`). While serving,
the purge is done right after the commit, or retried after later ones; the record is not
removed then, which would cost every forget another synced commit: a record left from a
purge already done costs the next open one truncation of a WAL that is usually empty.
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


def forget_purge(conn: sqlite3.Connection, wal: Path) -> None:
    """Remove the record of a purge just done — unless something committed since (the WAL
    is not empty any more: perhaps another process's forget, which recorded its own). If
    this fails the record stays, and the next open truncates the WAL once more: harmless.
    """
    with suppress(sqlite3.Error):
        conn.execute("BEGIN IMMEDIATE")  # no other process commits in between
        try:
            if _size(wal) == 0 and purge_recorded(conn):
                conn.execute(sql.DELETE_META, (PURGE_DUE,))
            conn.execute("COMMIT")
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")


__all__ = ["PURGE_DUE", "forget_purge", "purge_recorded", "truncate"]
