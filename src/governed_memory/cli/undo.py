"""Undoing what a failed command created on disk: ``gmem import`` into a fresh store.

Opening a store creates its data directory, its SQLite file (and the file's journal) and
a new ``master.key``. An import that then fails (a bad line, a foreign master key) must
not leave them behind: the next attempt would find a store, or worse a new master key
that no export was wrapped under. Only what did not exist before the command is removed;
a store that was there stays as it was. A PostgreSQL database keeps its (empty) tables:
the import wrote nothing into them, so the next import finds the store empty.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from governed_memory.bootstrap import key_directory, store_location
from governed_memory.config import Settings
from governed_memory.crypto import MASTER_KEY_FILE

#: What SQLite keeps beside a database file while it is open or after a crash.
SIDE_FILES = ("-wal", "-shm", "-journal")


def created_paths(chosen: Settings) -> tuple[list[Path], list[Path]]:
    """The files and the folders opening the store of ``chosen`` may create."""
    folders = [key_directory(chosen.data_dir, chosen.database_url)]
    files = [folders[0] / MASTER_KEY_FILE]
    kind, where = store_location(chosen.data_dir, chosen.database_url)
    if kind == "sqlite":
        database = Path(where)
        files += [database, *(database.with_name(database.name + end) for end in SIDE_FILES)]
    return files, folders


@contextmanager
def undone_on_failure(chosen: Settings) -> Iterator[None]:
    """Remove the store files and folders the block created, if it raises. The block must
    close the store before it ends (a ``with`` inside this one)."""
    files, folders = created_paths(chosen)
    new_files = [path for path in files if not path.exists()]
    new_folders = [path for folder in folders for path in _missing(folder)]
    try:
        yield
    except BaseException:
        for path in new_files:
            path.unlink(missing_ok=True)
        for folder in new_folders:
            _remove_if_empty(folder)
        raise


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
