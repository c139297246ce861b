"""The composition root: the store, the keyring and the service, opened and put together.

The library opens a service with :func:`open_service` (or just a store with
:func:`open_store`); ``gmem`` and the HTTP app open what their settings describe with
:func:`store_from`, :func:`service_from` and :func:`open_from`. Which URL names which
backend is stated in :mod:`governed_memory.locations`. The master key comes from the
caller (``GMEM_MASTER_KEY``) or from the key file ``master.key`` beside the SQLite
database (in the data directory, or in the folder of a ``sqlite:///`` file), created with
mode 0600 on first use, and must match the subject keys already stored.

Where things are made: the data directory is created on first use, and that is said (an
INFO record of the ``governed_memory.bootstrap`` logger, which ``gmem`` prints); the folder
of a ``sqlite:///`` file must exist already, so a mistyped path fails instead of growing a
tree of folders. PostgreSQL is probed once before its pool opens, so a wrong URL fails at
once with its reason (:mod:`governed_memory.store.postgres.database`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from governed_memory.analysis import Analyzer
from governed_memory.core.policy import RetentionPolicy, TtlPolicy
from governed_memory.crypto import (
    MASTER_KEY_CHECK,
    MASTER_KEY_FILE,
    Keyring,
    load_or_create_key_file,
    parse_master_key,
)
from governed_memory.errors import ConfigError, CryptoError, ValidationError
from governed_memory.locations import (
    DEFAULT_DATA_DIR,
    backend_of,
    is_postgres,
    postgres_location,
    sqlite_file,
)
from governed_memory.ports import Clock, Embedder, Store
from governed_memory.service import MemoryService
from governed_memory.service.indexing import SearchSettings, check_index
from governed_memory.store.sqlite import DATABASE_FILE, SQLiteStore, Synchronous

if TYPE_CHECKING:  # settings are read, never built, here: no pydantic for library callers
    from governed_memory.config import Settings

log = logging.getLogger("governed_memory.bootstrap")

#: The TTL and retention policies a service is opened with (``None``: the defaults).
Policies = tuple[TtlPolicy | None, RetentionPolicy | None]

#: Said when a key file is missing: where earlier versions put the key of a sqlite:/// store.
LEGACY_KEY_HINT = (
    " (earlier versions of gmem kept the key of a sqlite:/// store in ./gmem-data of the "
    "folder they ran in)"
)


def open_store(
    *,
    data_dir: str | Path = DEFAULT_DATA_DIR,
    database_url: str | None = None,
    synchronous: Synchronous = "FULL",
    read_only: bool = False,
    **options: Any,
) -> Store:
    """The store a URL names, or the embedded SQLite store in ``data_dir``; migrated.

    ``read_only`` opens a SQLite store without migrating or writing anything (for commands
    that only read, so a store on read-only media can be exported); PostgreSQL ignores it.
    ``options`` go to the PostgreSQL store (``max_size``, ``min_size``…).
    """
    if database_url is None:
        if not read_only:
            _make_data_dir(Path(data_dir))
        return SQLiteStore(
            Path(data_dir) / DATABASE_FILE, synchronous=synchronous, read_only=read_only
        )
    if backend_of(database_url) == "postgres":
        # Imported here: psycopg costs start-up time that SQLite users need not pay.
        from governed_memory.store.postgres import PostgresStore

        return PostgresStore(database_url, **options)
    path = sqlite_file(database_url)
    if not path.parent.is_dir():
        raise ConfigError(
            f"GMEM_DATABASE_URL: the folder {path.parent} of the SQLite file does not exist; "
            "create it first (gmem creates only the database file)"
        )
    return SQLiteStore(path, synchronous=synchronous, read_only=read_only)


def _make_data_dir(data_dir: Path) -> None:
    """Create a missing data directory, and say so: a new store is not made in silence."""
    if data_dir.is_dir():
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    log.info("created the data directory %s for a new store", data_dir.resolve())


def key_directory(data_dir: str | Path, database_url: str | None) -> Path:
    """Where ``master.key`` lives: beside the SQLite database it belongs to (the data
    directory, or the folder of a ``sqlite:///`` file); for PostgreSQL, the data directory
    (but PostgreSQL needs ``GMEM_MASTER_KEY``, so it never reads the file)."""
    if database_url is not None and backend_of(database_url) == "sqlite":
        return sqlite_file(database_url).parent
    return Path(data_dir)


def store_location(
    data_dir: str | Path, database_url: str | None
) -> tuple[Literal["sqlite", "postgresql"], str]:
    """The kind of store and where it is: the database file, or the PostgreSQL server and
    database without role or password (fit for a log line)."""
    if database_url is not None and backend_of(database_url) == "postgres":
        return "postgresql", postgres_location(database_url)
    if database_url is not None:
        return "sqlite", str(sqlite_file(database_url))
    return "sqlite", str((Path(data_dir) / DATABASE_FILE).resolve())


def describe_store(data_dir: str | Path, database_url: str | None) -> str:
    """The store in words: ``the sqlite store /srv/gmem-data/gmem.sqlite3``."""
    kind, where = store_location(data_dir, database_url)
    return f"the {kind} store {where}"


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
    search_language: str = "english",
    search_languages: Mapping[str, str] | None = None,
    embedder: Embedder | None = None,
    tracing: bool = False,
    **options: Any,
) -> MemoryService:
    """A ready service: store opened and migrated, keyring loaded; ``close()`` it after.

    With PostgreSQL the master key must be given: instances sharing a database must wrap
    subject keys with the same key, and a key file per instance would split them.
    ``search_language`` is the analyzer's language for every tenant but those of
    ``search_languages`` (tenant → language); ``embedder`` turns semantic recall on
    (:class:`governed_memory.semantic.MiniLM` is the one the extra ships). The store's
    search index must have been built with these settings (an empty store records them).
    ``tracing`` puts use cases and store calls in OpenTelemetry spans of the process's
    tracer provider (the ``otel`` extra; :mod:`governed_memory.telemetry`).
    """
    search = search_settings(search_language, search_languages or {}, embedder)
    policies = (policy, retention)
    service, _ = _open(
        data_dir,
        database_url,
        master_key,
        synchronous,
        policies,
        clock,
        search,
        options=options,
        tracing=tracing,
    )
    return service


def store_from(settings: Settings, *, read_only: bool = False) -> Store:
    """The store the settings describe (``gmem keys``, ``gmem migrate``)."""
    return open_store(
        data_dir=settings.data_dir,
        database_url=settings.database_url,
        synchronous=settings.sqlite_synchronous,
        read_only=read_only,
        **settings.store_options(),
    )


def service_from(
    settings: Settings, *, read_only: bool = False, reindexing: bool = False, bind: bool = True
) -> MemoryService:
    """The service the settings describe (``gmem replay``, ``expire``, ``export``…);
    ``read_only`` for the commands that only read (see :func:`open_store`); ``reindexing``
    for ``gmem reindex`` only, which rebuilds a search index built with other settings, so
    the store's index is not checked against these. Not ``bind``: an unbound store is not
    bound to the master key at open (``gmem import``, which binds it only once the export
    is known to be wrapped under that key; see :func:`_bind`)."""
    service, _ = open_from(
        settings, read_only=read_only, reindexing=reindexing, warm=False, bind=bind
    )
    return service


def open_from(
    settings: Settings,
    *,
    read_only: bool = False,
    reindexing: bool = False,
    warm: bool = True,
    bind: bool = True,
) -> tuple[MemoryService, Store]:
    """The service the settings describe, and its store for the API keys an adapter reads
    (``gmem serve``); closing the service closes the store.

    With semantic recall on, the model is loaded now (``warm``: a server must not make its
    first request wait seconds for it, and a model that cannot load must stop start-up);
    the commands that may not need it leave it to load on first use. With ``GMEM_OTEL=on``
    the service and store are traced, the exporter installed (:mod:`.telemetry`).
    """
    tracing = settings.otel == "on"
    if tracing:
        # Imported here: without tracing on, nothing of OpenTelemetry is loaded.
        from governed_memory import telemetry

        telemetry.configure(settings.otel_exporter)
    search = search_settings(
        settings.search_language, settings.tenant_languages(), _embedder(settings, warm)
    )
    return _open(
        settings.data_dir,
        settings.database_url,
        settings.master_key_value(),
        settings.sqlite_synchronous,
        (settings.ttl_policy(), settings.retention_policy()),
        None,
        search,
        options=settings.store_options() | {"read_only": read_only},
        reindexing=reindexing,
        bind=bind,
        tracing=tracing,
    )


def search_settings(
    language: str, tenants: Mapping[str, str], embedder: Embedder | None
) -> SearchSettings:
    """The analyzers (and the embedder) the search index is built with."""
    return SearchSettings(
        Analyzer(language), {tenant: Analyzer(lang) for tenant, lang in tenants.items()}, embedder
    )


def _embedder(settings: Settings, warm: bool) -> Embedder | None:
    """The embedder of semantic recall when it is on (the extra's model), else ``None``."""
    if settings.semantic == "off":
        return None
    # Imported here: only a service with semantic recall on needs the extra at all.
    from governed_memory.semantic import MiniLM

    embedder = MiniLM()
    if warm:
        embedder.load()
    return embedder


def _open(
    data_dir: str | Path,
    database_url: str | None,
    master_key: str | None,
    synchronous: Synchronous,
    policies: Policies,
    clock: Clock | None,
    search: SearchSettings,
    *,
    options: dict[str, Any],
    reindexing: bool = False,
    bind: bool = True,
    tracing: bool = False,
) -> tuple[MemoryService, Store]:
    if is_postgres(database_url) and not master_key:
        raise ValidationError(
            "GMEM_MASTER_KEY is required with a PostgreSQL database: every instance must "
            "share one master key"
        )
    store = open_store(
        data_dir=data_dir, database_url=database_url, synchronous=synchronous, **options
    )
    read_only = bool(options.get("read_only", False))
    kind, where = store_location(data_dir, database_url)
    service_class = MemoryService
    if tracing:
        store, service_class = _traced(store, kind)
    keys = _KeySource(
        key_directory(data_dir, database_url), master_key, read_only, f"{kind} {where}", bind
    )
    # A reindex rebuilds an index of other settings; a read-only command never searches or
    # indexes (and could not record settings on an empty store).
    checked = not reindexing and not read_only
    service = _service_over(store, keys, policies, clock, search, checked, service_class)
    return service, store


def _traced(store: Store, backend: str) -> tuple[Store, type[MemoryService]]:
    """The store with its calls traced, and the service class whose use cases are."""
    from governed_memory import telemetry  # the otel extra, loaded only when tracing is on

    return telemetry.traced_store(store, backend), telemetry.TracedService


@dataclass(frozen=True, slots=True)
class _KeySource:
    """Where the master key comes from (``master_key`` if given, else the key file in
    ``key_dir``), whether the store is opened read-only (then the key's check value
    is compared, not recorded), the store in words for a refusal (``where``), and whether
    an unbound store is bound now (``bind``; if not, the check value is compared when
    there is one, and recorded later, by ``gmem import``)."""

    key_dir: Path
    master_key: str | None
    read_only: bool
    where: str
    bind: bool = True


def _service_over(
    store: Store,
    keys: _KeySource,
    policies: Policies,
    clock: Clock | None,
    search: SearchSettings,
    checked: bool,
    service_class: type[MemoryService] = MemoryService,
) -> MemoryService:
    """The service over ``store`` with the matching keyring and, when ``checked``, a search
    index built with ``search`` (recorded now on an empty store); the store is closed on
    failure."""
    try:
        keyring = _matching_keyring(store, keys)
        if checked:
            check_index(store, search, empty=store.head() == 0)
    except BaseException:
        store.close()
        raise
    policy, retention = policies
    return service_class(
        store, keyring, policy=policy, retention=retention, clock=clock, search=search
    )


def _matching_keyring(store: Store, keys: _KeySource) -> Keyring:
    """The keyring, refusing a master key other than the one the store was created with.

    A lost or swapped ``master.key``, or a second instance of one database started with
    another ``GMEM_MASTER_KEY``, must stop the service at start-up, not surface later as
    undecryptable reads and a store split between two keys (see :func:`_bind`).
    """
    key_dir, master_key = keys.key_dir, keys.master_key
    probe = next(store.subject_keys(limit=1), None)
    if not master_key and probe is not None and not (key_dir / MASTER_KEY_FILE).exists():
        raise ValidationError(
            f"{MASTER_KEY_FILE} is missing from {key_dir.resolve()}, the folder of the "
            "database, which holds subject keys wrapped by a master key: put the store's "
            f"{MASTER_KEY_FILE} back there, or set GMEM_MASTER_KEY to it"
            + (LEGACY_KEY_HINT if key_dir != Path(DEFAULT_DATA_DIR) else "")
        )
    keyring = open_keyring(data_dir=key_dir, master_key=master_key)
    try:
        if probe is not None:
            keyring.unwrap(probe)
        wrapped_here = True
    except CryptoError:
        wrapped_here = False
    _bind(store, keyring, wrapped_here, keys)
    return keyring


def _bind(store: Store, keyring: Keyring, wrapped_here: bool, keys: _KeySource) -> None:
    """Bind the store to the keyring's master key, or refuse a store bound to another.

    The store records the key's check value (never the key) at its first start, first
    claim wins across every instance of one database; every later start compares. A
    store from before the check value existed is bound at its next start, but only if
    the subject keys it holds unwrap under this master key (``wrapped_here``); a bound
    store whose keys do not was altered, and is refused too. A read-only open compares
    and records nothing; so does an open that does not ``bind`` (``gmem import``: an import
    that fails must not leave an empty store bound to a master key no export was checked
    against; :meth:`~governed_memory.service.maintenance.Maintenance.import_log` binds it
    before its first write).
    """
    wanted = keyring.check_value()
    stored = store.meta(MASTER_KEY_CHECK)
    if stored is None:
        if not wrapped_here:
            raise ValidationError(_another_key(keys.where))
        if keys.read_only or not keys.bind:
            return
        stored = store.claim_meta(MASTER_KEY_CHECK, wanted)
    if stored != wanted:
        raise ValidationError(_another_key(keys.where))
    if not wrapped_here:
        raise ValidationError(
            f"this store ({keys.where}) holds a subject key its own master key does not "
            "unwrap: its keys were altered, or copied in from another store"
        )


def _another_key(where: str) -> str:
    return (
        f"this store ({where}) was created with another master key: start it with the "
        f"master key it was created with (GMEM_MASTER_KEY, or the {MASTER_KEY_FILE} of "
        "its SQLite file's folder)"
    )


__all__ = [
    "DEFAULT_DATA_DIR",
    "describe_store",
    "key_directory",
    "open_from",
    "open_keyring",
    "open_service",
    "open_store",
    "search_settings",
    "service_from",
    "store_from",
    "store_location",
]
