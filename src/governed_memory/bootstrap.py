"""The composition root: the store, the keyring and the service, opened and put together.

The library opens a service with :func:`open_service` (or just a store with
:func:`open_store`); ``gmem`` and the HTTP app open what their settings describe with
:func:`store_from`, :func:`service_from` and :func:`open_from`. Which URL names which
backend is stated in :mod:`governed_memory.locations`. The master key comes from the
caller (``GMEM_MASTER_KEY``) or from the key file in the data directory, created with mode
0600 on first use, and must match the subject keys already stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_memory.core.policy import RetentionPolicy, TtlPolicy
from governed_memory.crypto import (
    MASTER_KEY_FILE,
    Keyring,
    load_or_create_key_file,
    parse_master_key,
)
from governed_memory.errors import CryptoError, ValidationError
from governed_memory.locations import DEFAULT_DATA_DIR, backend_of, is_postgres, sqlite_file
from governed_memory.ports import Clock, Store
from governed_memory.service import MemoryService
from governed_memory.store.sqlite import DATABASE_FILE, SQLiteStore, Synchronous

if TYPE_CHECKING:  # settings are read, never built, here: no pydantic for library callers
    from governed_memory.config import Settings

#: The TTL and retention policies a service is opened with (``None``: the defaults).
Policies = tuple[TtlPolicy | None, RetentionPolicy | None]


def open_store(
    *,
    data_dir: str | Path = DEFAULT_DATA_DIR,
    database_url: str | None = None,
    synchronous: Synchronous = "FULL",
    **options: Any,
) -> Store:
    """The store a URL names, or the embedded SQLite store in ``data_dir``; migrated.

    ``options`` go to the PostgreSQL store (``max_size``, ``min_size``…).
    """
    if database_url is None:
        return SQLiteStore(Path(data_dir) / DATABASE_FILE, synchronous=synchronous)
    if backend_of(database_url) == "postgres":
        # Imported here: psycopg costs start-up time that SQLite users need not pay.
        from governed_memory.store.postgres import PostgresStore

        return PostgresStore(database_url, **options)
    return SQLiteStore(sqlite_file(database_url), synchronous=synchronous)


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
    retention: RetentionPolicy | None = None,
    **options: Any,
) -> MemoryService:
    """A ready service: store opened and migrated, keyring loaded; ``close()`` it after.

    With PostgreSQL the master key must be given: instances sharing a database must wrap
    subject keys with the same key, and a key file per instance would split them.
    """
    service, _ = _open(
        data_dir,
        database_url,
        master_key,
        synchronous,
        (policy, retention),
        clock,
        options=options,
    )
    return service


def store_from(settings: Settings) -> Store:
    """The store the settings describe (``gmem keys``, ``gmem migrate``)."""
    return open_store(
        data_dir=settings.data_dir,
        database_url=settings.database_url,
        synchronous=settings.sqlite_synchronous,
        **settings.store_options(),
    )


def service_from(settings: Settings) -> MemoryService:
    """The service the settings describe (``gmem replay``, ``expire``, ``export``…)."""
    service, _ = open_from(settings)
    return service


def open_from(settings: Settings) -> tuple[MemoryService, Store]:
    """The service the settings describe, and its store for the API keys an adapter reads
    (``gmem serve``); closing the service closes the store."""
    return _open(
        settings.data_dir,
        settings.database_url,
        settings.master_key_value(),
        settings.sqlite_synchronous,
        (settings.ttl_policy(), settings.retention_policy()),
        None,
        options=settings.store_options(),
    )


def _open(
    data_dir: str | Path,
    database_url: str | None,
    master_key: str | None,
    synchronous: Synchronous,
    policies: Policies,
    clock: Clock | None,
    *,
    options: dict[str, Any],
) -> tuple[MemoryService, Store]:
    if is_postgres(database_url) and not master_key:
        raise ValidationError(
            "GMEM_MASTER_KEY is required with a PostgreSQL database: every instance must "
            "share one master key"
        )
    store = open_store(
        data_dir=data_dir, database_url=database_url, synchronous=synchronous, **options
    )
    return _service_over(store, data_dir, master_key, policies, clock), store


def _service_over(
    store: Store,
    data_dir: str | Path,
    master_key: str | None,
    policies: Policies,
    clock: Clock | None,
) -> MemoryService:
    """The service over ``store`` with the matching keyring; the store is closed on failure."""
    try:
        keyring = _matching_keyring(store, data_dir, master_key)
    except BaseException:
        store.close()
        raise
    policy, retention = policies
    return MemoryService(store, keyring, policy=policy, retention=retention, clock=clock)


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


__all__ = [
    "DEFAULT_DATA_DIR",
    "open_from",
    "open_keyring",
    "open_service",
    "open_store",
    "service_from",
    "store_from",
]
