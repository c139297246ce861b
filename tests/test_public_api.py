"""The package's public API is explicit: a sorted ``__all__`` whose names all exist, and a
package root light enough for the HTTP client."""

from __future__ import annotations

import subprocess
import sys
from types import ModuleType

import pytest

import governed_memory

#: Names every module with postponed annotations and lazy imports has; not API.
MACHINERY = {"annotations", "TYPE_CHECKING"}


def test_all_is_sorted_and_complete() -> None:
    """``__all__`` is sorted and unique, lists every public name of the root (eager or
    lazy), and every name in it resolves to the object of its home module."""
    names = governed_memory.__all__
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    public = {
        name
        for name in dir(governed_memory)
        if not name.startswith("_") and not isinstance(getattr(governed_memory, name), ModuleType)
    }
    assert set(names) == public - MACHINERY
    for name in names:
        value = getattr(governed_memory, name)
        assert value is getattr(sys.modules[value.__module__], name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    """The lazy lookup refuses names the package does not have, as a module would."""
    with pytest.raises(AttributeError, match="NoSuchThing"):
        governed_memory.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018


def test_importing_the_client_loads_no_server() -> None:
    """``import governed_memory.client`` loads no store, no service, no crypto library and
    no web framework: the client sits beside the server, not on top of it."""
    code = (
        "import sys, governed_memory.client\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(("
        "'governed_memory', 'cryptography', 'fastapi', 'starlette', 'psycopg', 'pydantic')))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    heavy = ("governed_memory.store", "governed_memory.service", "governed_memory.crypto")
    assert not [m for m in loaded if m.startswith(heavy)], loaded
    assert not [m for m in loaded if m.split(".")[0] != "governed_memory"], loaded


def test_the_package_is_typed() -> None:
    """A py.typed marker ships with the package."""
    from importlib import resources

    assert resources.files("governed_memory").joinpath("py.typed").is_file()
