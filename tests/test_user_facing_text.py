"""What users read carries no citation of the developers' specification, and the install
line of the MCP extra is the same in the docs and in ``gmem mcp``'s own error."""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import re
from pathlib import Path
from typing import Any

import governed_memory
import governed_memory.client
from governed_memory.cli import build_parser
from governed_memory.config import load_settings
from governed_memory.http.app import create_app
from governed_memory.mcp_server import INSTALL_MCP, SDK_MISSING
from tests.docs.blocks import blocks

SRC = Path(governed_memory.__file__).parent
CITATION = re.compile(r"\bSPEC\s*§")


def helps(parser: argparse.ArgumentParser) -> list[str]:
    """The --help text of ``parser`` and of every command below it."""
    found = [parser.format_help()]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.extend(helps(sub))
    return found


def message_strings() -> list[tuple[str, str]]:
    """Every string literal of the package that is not a docstring: error messages, help
    texts, tool descriptions, log messages."""
    found: list[tuple[str, str]] = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
            ):
                found.append((f"{path.relative_to(SRC)}:{node.lineno}", node.value))
    return found


def public_docstrings() -> list[tuple[str, str]]:
    """The docstrings ``help()`` shows for the public API: each name and its methods."""
    found: list[tuple[str, str]] = []
    for module in (governed_memory, governed_memory.client):
        for name in module.__all__:
            value: Any = getattr(module, name)
            found.append((name, inspect.getdoc(value) or ""))
            for member, attribute in vars(value).items() if inspect.isclass(value) else []:
                if not member.startswith("_") and callable(attribute):
                    found.append((f"{name}.{member}", inspect.getdoc(attribute) or ""))
    return found


def test_no_help_text_cites_the_spec() -> None:
    """``gmem --help`` and every command's help are free of "SPEC §"."""
    assert [text for text in helps(build_parser()) if CITATION.search(text)] == []


def test_no_message_of_the_package_cites_the_spec() -> None:
    """No error message, help text, tool description or log message cites "SPEC §"."""
    assert [where for where, text in message_strings() if CITATION.search(text)] == []


def test_the_public_api_docs_do_not_cite_the_spec() -> None:
    """What ``help()`` shows of the public API is free of "SPEC §"."""
    assert [name for name, text in public_docstrings() if CITATION.search(text)] == []


def test_the_openapi_document_does_not_cite_the_spec(tmp_path: Path) -> None:
    """No description of the OpenAPI document cites "SPEC §"."""
    app = create_app(load_settings(data_dir=tmp_path))
    try:
        assert not CITATION.search(json.dumps(app.openapi(), ensure_ascii=False))
    finally:
        app.state.service.close()


def test_the_mcp_install_line_is_the_one_gmem_mcp_prints() -> None:
    """docs/mcp.md's install command is the one ``gmem mcp`` prints without the SDK: from a
    checkout, as the package is not on PyPI."""
    page = Path(__file__).resolve().parents[1] / "docs" / "mcp.md"
    commands = [b.code.strip() for b in blocks(page, "docs/mcp.md") if "pip install" in b.code]
    assert commands == [INSTALL_MCP]
    assert SDK_MISSING.endswith(INSTALL_MCP)
    assert "not on PyPI" in SDK_MISSING
