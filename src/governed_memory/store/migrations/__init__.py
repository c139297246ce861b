"""Numbered schema migrations, one folder per backend, applied in order on open.

A migration is ``NNNN_name.sql`` in the backend's folder (``sqlite/``, ``postgres/``); each
backend records the numbers it has applied in its ``schema_migrations`` table, in the
same transaction as the migration itself.
"""

from __future__ import annotations

from importlib import resources
from typing import Literal

Dialect = Literal["sqlite", "postgres"]


def scripts(dialect: Dialect) -> list[tuple[int, str]]:
    """The numbered migrations of ``dialect`` shipped with the package, in order."""
    folder = resources.files(__name__).joinpath(dialect)
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text("utf-8")))
    return sorted(found)


__all__ = ["Dialect", "scripts"]
