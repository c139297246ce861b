"""Undoing what a failed command created on disk: ``gmem import`` into a fresh store.

Opening a store creates its data directory, its SQLite file (and the file's journal) and
a new ``master.key``. An import that then fails (a bad line, a foreign master key) must
not leave them behind: the next attempt would find a store, or worse a new master key
that no export was wrapped under. Only what did not exist before the command is removed;
a store that was there stays as it was. A PostgreSQL database keeps its (empty) tables:
the import wrote nothing into them, and bound them to no master key, so the next import
finds the store empty.

Another process may have opened the new store while the import was still reading its
export (a slow, streamed one), and written to it. So before removing anything the store
is opened again and must still be untouched: no event, no subject key, no API key, and
bound to no master key (the import binds it only once its export checked out, so a
binding is another process's, or a load that failed half-way). If it is not, nothing is
removed, and that is said. The database's side files and ``master.key`` are removed only
with the database file: the side files of a database another process has open are its
data, and the master key may already wrap its keys.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from governed_memory.bootstrap import describe_store, key_directory, store_from, store_location
from governed_memory.config import Settings
from governed_memory.crypto import MASTER_KEY_CHECK, MASTER_KEY_FILE
from governed_memory.ports import holds_log

#: What SQLite keeps beside a database file while it is open or after a crash, and the
#: file its writers take turns on (store/sqlite/turns.py).
SIDE_FILES = ("-wal", "-shm", "-journal", "-lock")

log = logging.getLogger("governed_memory.bootstrap")  # printed as a ``gmem: note:`` line


def created_paths(chosen: Settings) -> tuple[Path | None, list[Path], list[Path]]:
    """The SQLite database file (``None`` for PostgreSQL), the files that go with it (its
    side files, ``master.key``) and the folders opening the store of ``chosen`` may
    create."""
    folders = [key_directory(chosen.data_dir, chosen.database_url)]
    kind, where = store_location(chosen.data_dir, chosen.database_url)
    if kind != "sqlite":
        return None, [folders[0] / MASTER_KEY_FILE], folders
    database = Path(where)
    sides = [database.with_name(database.name + end) for end in SIDE_FILES]
    return database, [*sides, folders[0] / MASTER_KEY_FILE], folders


@contextmanager
def undone_on_failure(chosen: Settings) -> Iterator[None]:
    """Remove the store files and folders the block created, if it raises and the store
    is still untouched. The block must close the store before it ends (a ``with`` inside
    this one)."""
    database, companions, folders = created_paths(chosen)
    new_database = database is not None and not database.exists()
    new_files = [path for path in companions if not path.exists()]
    new_folders = [path for folder in folders for path in _missing(folder)]
    try:
        yield
    except BaseException:
        if database is not None and new_database and database.exists():
            if not _untouched(chosen):
                log.info(
                    "%s has data or a master key binding now (another process wrote to "
                    "it, or the import failed while loading): nothing was removed",
                    describe_store(chosen.data_dir, chosen.database_url),
                )
                raise
            database.unlink(missing_ok=True)
            for path in new_files:
                path.unlink(missing_ok=True)
        _say_if_key_stays(companions[-1], new_files)
        for folder in new_folders:
            _remove_if_empty(folder)
        raise


def _say_if_key_stays(key: Path, new_files: list[Path]) -> None:
    """Say so when the ``master.key`` the block created stays (beside a database that was
    there before): the store is bound to no key yet, but a later start without
    ``GMEM_MASTER_KEY`` will read that file."""
    if key in new_files and key.exists():
        log.info(
            "%s was created for this store and stays, as the database was there before: "
            "replace it with the key the export was made under, or set GMEM_MASTER_KEY",
            key,
        )


def _untouched(chosen: Settings) -> bool:
    """Whether the store holds nothing at all and is bound to no master key (opened
    again, read-only); not if it cannot even be opened."""
    try:
        with closing(store_from(chosen, read_only=True)) as store:
            return (
                not holds_log(store)
                and not store.api_keys()
                and store.meta(MASTER_KEY_CHECK) is None
            )
    except Exception:  # noqa: BLE001 - a store that cannot be read is kept, not removed
        return False


def _missing(folder: Path) -> list[Path]:
    """``folder`` and those above it that do not exist, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_if_empty(folder: Path) -> None:
    """Remove ``folder`` if it is empty (if not, it holds something the block did not
    create, which stays)."""
    try:
        folder.rmdir()
    except OSError:
        return


__all__ = ["undone_on_failure"]
