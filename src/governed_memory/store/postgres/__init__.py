"""The PostgreSQL backend: several service instances sharing one database.

Read side by side with :mod:`governed_memory.store.sqlite`: the same module names hold
the same parts (``store``, ``database``, ``batch``, ``search``, ``bulk``, ``sql``).
"""

from governed_memory.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
