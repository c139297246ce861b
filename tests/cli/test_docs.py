"""Every command has help text and a section in docs/cli.md; every route one in docs/http-api.md."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from governed_memory.cli import build_parser
from governed_memory.config import load_settings
from governed_memory.http.app import create_app
from tests.cli.conftest import Gmem

DOCS = Path(__file__).resolve().parents[2] / "docs"


def commands(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Every runnable command path of the parser, e.g. ("keys", "create")."""
    found: list[tuple[str, ...]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = commands(sub, (*prefix, name))
                found.extend(nested or [(*prefix, name)])
    return found


ALL_COMMANDS = commands(build_parser())


SPEC_COMMANDS = [
    ("serve",),
    ("keys", "create"),
    ("keys", "list"),
    ("keys", "revoke"),
    ("demo",),
    ("replay",),
    ("expire",),
    ("export",),
    ("import",),
    ("migrate",),
]


def subparser(command: tuple[str, ...]) -> argparse.ArgumentParser:
    """The parser of one command path."""
    parser = build_parser()
    for name in command:
        parser = next(
            action.choices[name]
            for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
        )
    return parser


def test_the_cli_has_the_commands_of_the_spec() -> None:
    """gmem has serve, keys create|list|revoke, demo, replay, expire, export, import, migrate."""
    assert set(SPEC_COMMANDS) <= set(ALL_COMMANDS)


@pytest.mark.parametrize("command", [(), ("keys",), *ALL_COMMANDS], ids=" ".join)
def test_every_command_has_help(gmem: Gmem, command: tuple[str, ...]) -> None:
    """--help prints a description and usage and exits 0."""
    run = gmem(*command, "--help")
    assert run.status == 0
    assert run.out.startswith(f"usage: gmem {' '.join(command)}".rstrip())
    assert len(run.out.splitlines()) > 3


@pytest.mark.parametrize("command", SPEC_COMMANDS, ids=" ".join)
def test_every_command_accepts_data_dir_and_database_url(command: tuple[str, ...]) -> None:
    """Every store command takes --data-dir and --database-url, mirroring GMEM_* variables."""
    options = {o for action in subparser(command)._actions for o in action.option_strings}
    assert {"--data-dir", "--database-url", "--config"} <= options


def test_every_command_is_documented() -> None:
    """docs/cli.md has a section for each command, and none for a command that is gone."""
    headings = re.findall(r"^## `gmem ([a-z ]+)`$", (DOCS / "cli.md").read_text(), re.M)
    assert sorted(headings) == sorted(" ".join(c) for c in ALL_COMMANDS)


def test_every_route_is_documented_with_an_example(tmp_path: Path) -> None:
    """docs/http-api.md has a section with a curl example for each route of the app."""
    app = create_app(load_settings(data_dir=tmp_path))
    try:
        routes = {
            f"{method.upper()} {path}"
            for path, operations in app.openapi()["paths"].items()
            for method in operations
        }
    finally:
        app.state.service.close()
    text = (DOCS / "http-api.md").read_text()
    sections = dict(re.findall(r"^### `([A-Z]+ \S+)`\n(.*?)(?=^#)", text + "\n#", re.M | re.S))
    assert set(sections) == routes
    for route, section in sections.items():
        assert "curl" in section, route


def test_every_setting_but_the_master_key_has_a_flag_and_a_row_in_the_docs() -> None:
    """Each setting is a flag of ``gmem serve`` (the master key alone is not, so it never
    shows in a process list) and a row of docs/cli.md's settings table."""
    from governed_memory.config import Settings

    fields = set(Settings.model_fields) - {"master_key"}
    flags = {o for action in subparser(("serve",))._actions for o in action.option_strings}
    assert {"--" + field.replace("_", "-") for field in fields} <= flags
    assert "--master-key" not in flags
    table = (DOCS / "cli.md").read_text().split("## Settings", 1)[1]
    rows = set(re.findall(r"`(GMEM_[A-Z_<>]+)`", table))
    kinds = ("FACT", "PREFERENCE", "SKILL", "WORKING_NOTE")
    rows |= {row.replace("<KIND>", kind) for row in rows for kind in kinds}
    statuses = ("EXPIRED", "REJECTED", "SUPERSEDED")  # of the retention windows
    rows |= {row.replace("<STATUS>", status) for row in rows for status in statuses}
    assert {f"GMEM_{field.upper()}" for field in fields} <= rows
