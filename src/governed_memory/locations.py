"""Where the data lives: the default data directory, and which database URL names which store.

The one statement of the URL rules: ``postgresql://…`` or ``postgres://…`` selects
PostgreSQL, ``sqlite:////absolute/path`` an explicit SQLite file (four slashes: the scheme's
three and the path's own), and no URL at all the embedded SQLite store in the data
directory. A relative ``sqlite:///`` path is refused rather than resolved against whatever
folder the command happens to run in. The settings check a URL with these rules at
start-up (:mod:`governed_memory.config`); the composition root opens what it names
(:mod:`governed_memory.bootstrap`). Standard library only, so neither drags the other in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

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
        path = url.removeprefix(SQLITE_SCHEME)
        if not path:
            raise ValidationError.field("database_url", "sqlite:/// needs a file path")
        if not Path(path).is_absolute():
            absolute = Path.cwd() / path
            raise ValidationError.field(
                "database_url",
                f"the path of a sqlite:/// URL must be absolute, and {path} is relative: "
                f"write {SQLITE_SCHEME}{absolute} (four slashes) for that file in this folder",
            )
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


def postgres_location(url: str) -> str:
    """A PostgreSQL URL as ``postgresql://host:port/database``: no role, no password, no
    options, so it can be logged and printed."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port that is not a number: libpq will say so when it connects
        return "postgresql://(unparsable host or port)"
    database = parts.path.lstrip("/") or "(the role's default database)"
    if ":" in host:
        host = f"[{host}]"
    return f"postgresql://{host}{port}/{database}"


__all__ = [
    "DEFAULT_DATA_DIR",
    "POSTGRES_SCHEMES",
    "SQLITE_SCHEME",
    "Backend",
    "backend_of",
    "is_postgres",
    "postgres_location",
    "sqlite_file",
]
