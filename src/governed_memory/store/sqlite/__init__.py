"""The embedded SQLite backend: one database file, WAL, durable commits, secure delete.

Read side by side with :mod:`governed_memory.store.postgres`: the same module names hold
the same parts (``store``, ``database``, ``batch``, ``search``, ``bulk``, ``sql``), plus
``top_k``, SQLite's threshold algorithm over the postings, and ``wal``, the durable
purge of the write-ahead log after a key is destroyed.

The names below are imported on first use (PEP 562): a process that needs one part, such
as a rebuild's checking worker (:mod:`.checker`), does not load the whole store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governed_memory import _lazy

if TYPE_CHECKING:
    from governed_memory.store.sqlite.database import Synchronous
    from governed_memory.store.sqlite.store import DATABASE_FILE, SQLiteStore

_LAZY = {
    "DATABASE_FILE": "governed_memory.store.sqlite.store",
    "SQLiteStore": "governed_memory.store.sqlite.store",
    "Synchronous": "governed_memory.store.sqlite.database",
}


def __getattr__(name: str) -> object:
    return _lazy.load(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return _lazy.listed(__name__, _LAZY)


__all__ = ["DATABASE_FILE", "SQLiteStore", "Synchronous"]
