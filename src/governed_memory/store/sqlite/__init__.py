"""The embedded SQLite backend: one database file, WAL, durable commits, secure delete.

Read side by side with :mod:`governed_memory.store.postgres`: the same module names hold
the same parts (``store``, ``database``, ``batch``, ``search``, ``bulk``, ``sql``), plus
``top_k``, SQLite's threshold algorithm over the postings, and ``wal``, the durable
purge of the write-ahead log after a key is destroyed.
"""

from governed_memory.store.sqlite.database import Synchronous
from governed_memory.store.sqlite.store import DATABASE_FILE, SQLiteStore

__all__ = ["DATABASE_FILE", "SQLiteStore", "Synchronous"]
