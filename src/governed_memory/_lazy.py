"""Names a package imports on their first use (PEP 562): the one mechanism behind the
``__getattr__`` and ``__dir__`` of the package roots that have them (``governed_memory``,
``governed_memory.store.sqlite``), so that importing one part of the package loads that
part only."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping


def load(package: str, homes: Mapping[str, str], name: str) -> object:
    """``package``'s ``name`` from the module ``homes`` says defines it, imported now and
    bound in the package, so that the next lookup is an ordinary one. Any other name is an
    ``AttributeError``, as the import system needs to import a submodule of that name."""
    home = homes.get(name)
    if home is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    setattr(sys.modules[package], name, value)
    return value


def listed(package: str, homes: Mapping[str, str]) -> list[str]:
    """``package``'s names for ``dir()``: those bound so far and those yet to load."""
    return sorted(set(vars(sys.modules[package])) | set(homes))


__all__ = ["listed", "load"]
