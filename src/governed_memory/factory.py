"""Open a store and a service from a data directory or a database URL.

The one place that chooses a backend: ``postgresql://…`` selects PostgreSQL,
``sqlite:///path`` an explicit SQLite file, and nothing the embedded SQLite store in the
data directory. The master key comes from the caller (``GMEM_MASTER_KEY``) or from the key
file in the data directory, created with mode 0600 on first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from governed_memory.core.policy import TtlPolicy
from governed_memory.crypto import (
    MASTER_KEY_FILE,
    Keyring,
    load_or_create_key_file,
    parse_master_key,
)
from governed_memory.errors import CryptoError, ValidationError
from governed_memory.ports import Clock, Store
from governed_memory.service import MemoryService
from governed_memory.store.sqlite import DATABASE_FILE, SQLiteStore, Synchronous

DEFAULT_DATA_DIR = Path("./gmem-data")
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_store(
    *,
    data_dir: str | Path = DEFAULT_DATA_DIR,
    database_url: str | None = None,
    synchronous: Synchronous = "FULL",
    **options: Any,
) -> Store:
    """The store a URL names, or the embedded SQLite store in ``data_dir``."""
    if database_url is None:
        return SQLiteStore(Path(data_dir) / DATABASE_FILE, synchronous=synchronous)
    if database_url.startswith(POSTGRES_SCHEMES):
        from governed_memory.store.postgres import PostgresStore

        return PostgresStore(database_url, **options)
    if database_url.startswith("sqlite:///"):
        path = database_url.removeprefix("sqlite:///")
        if not path:
            raise ValidationError.field("database_url", "sqlite:/// needs a file path")
        return SQLiteStore(Path(path), synchronous=synchronous)
    raise ValidationError.field(
        "database_url", "must start with postgresql://, postgres:// or sqlite:///"
    )


def open_keyring(
    *, data_dir: str | Path = DEFAULT_DATA_DIR, master_key: str | None = None
) -> Keyring:
    """The keyring of ``master_key`` (base64), else of the data directory's key file."""
    if master_key:
        return Keyring(parse_master_key(master_key))
    return Keyring(load_or_create_key_file(Path(data_dir)))


def open_service(
    *,
    data_dir: str | Path = DEFAULT_DATA_DIR,
    database_url: str | None = None,
    master_key: str | None = None,
    synchronous: Synchronous = "FULL",
    policy: TtlPolicy | None = None,
    clock: Clock | None = None,
    **options: Any,
) -> MemoryService:
    """A ready service: store opened and migrated, keyring loaded.

    With PostgreSQL the master key must be given: instances sharing a database must wrap
    subject keys with the same key, and a key file per instance would split them.
    """
    if database_url is not None and database_url.startswith(POSTGRES_SCHEMES) and not master_key:
        raise ValidationError(
            "GMEM_MASTER_KEY is required with a PostgreSQL database: every instance must "
            "share one master key"
        )
    store = open_store(
        data_dir=data_dir, database_url=database_url, synchronous=synchronous, **options
    )
    try:
        keyring = _matching_keyring(store, data_dir, master_key)
    except BaseException:
        store.close()
        raise
    return MemoryService(store, keyring, policy=policy, clock=clock)


def _matching_keyring(store: Store, data_dir: str | Path, master_key: str | None) -> Keyring:
    """The keyring, refusing a master key that did not wrap the keys already stored.

    A lost or swapped ``master.key`` must stop the service at start-up, not surface later
    as undecryptable reads and a store split between two keys.
    """
    probe = next(store.subject_keys(limit=1), None)
    if not master_key and probe is not None and not (Path(data_dir) / MASTER_KEY_FILE).exists():
        raise ValidationError(
            f"{MASTER_KEY_FILE} is missing from the data directory, but the store holds subject "
            "keys wrapped by a master key: restore the file or set GMEM_MASTER_KEY"
        )
    keyring = open_keyring(data_dir=data_dir, master_key=master_key)
    if probe is not None:
        try:
            keyring.unwrap(probe)
        except CryptoError:
            raise ValidationError(
                "the master key does not match the subject keys stored in this database"
            ) from None
    return keyring
