"""Where the data lives: the default data directory, and which database URL names which store.

The one statement of the URL rules (SPEC §9): ``postgresql://…`` or ``postgres://…``
selects PostgreSQL, ``sqlite:///path`` an explicit SQLite file, and no URL at all the
embedded SQLite store in the data directory. The settings check a URL with these rules at
start-up (:mod:`governed_memory.config`); the composition root opens what it names
(:mod:`governed_memory.bootstrap`). Standard library only, so neither drags the other in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from governed_memory.errors import ValidationError

DEFAULT_DATA_DIR = Path("./gmem-data")
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
SQLITE_SCHEME = "sqlite:///"

Backend = Literal["postgres", "sqlite"]


def backend_of(url: str) -> Backend:
    """The backend ``url`` names; a :class:`ValidationError` on ``database_url`` if none."""
    if url.startswith(POSTGRES_SCHEMES):
        return "postgres"
    if url.startswith(SQLITE_SCHEME):
        if not url.removeprefix(SQLITE_SCHEME):
            raise ValidationError.field("database_url", "sqlite:/// needs a file path")
        return "sqlite"
    raise ValidationError.field(
        "database_url", "must start with postgresql://, postgres:// or sqlite:///"
    )


def is_postgres(url: str | None) -> bool:
    """Whether ``url`` names a PostgreSQL database (``None`` names the embedded SQLite)."""
    return url is not None and url.startswith(POSTGRES_SCHEMES)


def sqlite_file(url: str) -> Path:
    """The file of a ``sqlite:///path`` URL (checked by :func:`backend_of` first)."""
    return Path(url.removeprefix(SQLITE_SCHEME))


__all__ = [
    "DEFAULT_DATA_DIR",
    "POSTGRES_SCHEMES",
    "SQLITE_SCHEME",
    "Backend",
    "backend_of",
    "is_postgres",
    "sqlite_file",
]
