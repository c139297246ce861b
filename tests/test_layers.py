"""Imports follow the architecture: core ← service ← adapters, never the other way."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "governed_memory"
ADAPTERS = ("governed_memory.http", "governed_memory.cli", "governed_memory.worker")


def imports_of(path: Path) -> set[str]:
    """Every module a file imports (absolute names)."""
    tree = ast.parse(path.read_text("utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py")) if folder else [PACKAGE]


@pytest.mark.parametrize("path", modules("core"), ids=lambda p: p.name)
def test_the_core_imports_only_the_standard_library(path: Path) -> None:
    """No framework, driver or crypto library in the core; errors are its only neighbour."""
    for name in imports_of(path):
        root = name.split(".")[0]
        if root == "governed_memory":
            assert name.startswith(("governed_memory.core", "governed_memory.errors")), name
        else:
            assert root in sys.stdlib_module_names or root == "__future__", name


@pytest.mark.parametrize(
    "path",
    [*modules("store"), *modules("service"), PACKAGE / "ports.py", PACKAGE / "codec.py"],
    ids=lambda p: p.name,
)
def test_the_service_and_stores_never_import_an_adapter(path: Path) -> None:
    """Stores and the service know nothing of HTTP, the CLI or the worker."""
    for name in imports_of(path):
        assert not name.startswith(ADAPTERS), name
        assert not name.startswith(("fastapi", "starlette", "uvicorn", "pydantic")), name


#: The store modules every backend may import: the rest of store/ is one backend each.
SHARED_STORE_MODULES = tuple(
    f"governed_memory.store.{name}"
    for name in ("group_commit", "migrations", "paging", "sql_reads")
)


def backend_of(path: Path) -> str:
    """The store module or package a file belongs to: ``governed_memory.store.sqlite``."""
    parts = path.relative_to(PACKAGE / "store").with_suffix("").parts
    return "governed_memory.store." + parts[0]


@pytest.mark.parametrize(
    "path", modules("store"), ids=lambda p: str(p.relative_to(PACKAGE / "store"))
)
def test_stores_do_not_import_the_service_or_each_other(path: Path) -> None:
    """One module or package per backend, each standing alone behind the port."""
    own = backend_of(path)
    for name in imports_of(path):
        assert name != "governed_memory.service", name
        if name.startswith("governed_memory.store.") and not name.startswith(SHARED_STORE_MODULES):
            assert name == own or name.startswith(own + "."), name
