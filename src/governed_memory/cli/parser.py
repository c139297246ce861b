"""The ``gmem`` parser, built from one table: each command, its help, settings and options."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, TextIO

from governed_memory._version import __version__
from governed_memory.cli import audit, commands, keys
from governed_memory.cli.options import (
    INDEX_FIELDS,
    RETENTION_FIELDS,
    SERVE_FIELDS,
    SERVICE_FIELDS,
    STORE_FIELDS,
    add_settings,
)
from governed_memory.cli.quarantine import add_command as add_quarantine_command
from governed_memory.mcp_server import add_command as add_mcp_command

Run = Callable[[argparse.Namespace, TextIO], int]


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


@dataclass(frozen=True, slots=True)
class Option:
    """One argument of a command: its names and ``add_argument``'s keywords."""

    names: tuple[str, ...]
    keywords: Mapping[str, Any]


def option(*names: str, **keywords: Any) -> Option:
    return Option(names, keywords)


@dataclass(frozen=True, slots=True)
class Command:
    """One command: its words (``keys create``), what runs it, its help and arguments."""

    words: str
    run: Run
    help: str
    settings: Sequence[str] = STORE_FIELDS
    options: Sequence[Option] = field(default_factory=tuple)
    #: Help of setting flags this command reads its own way (flag's field → help).
    setting_helps: Mapping[str, str] = field(default_factory=dict)


#: Commands of two words, and the help of their first word.
GROUPS = {
    "keys": "Create, list and revoke API keys.",
    "audit": "Verify the event log's hash chain; show each tenant's head.",
}

COMMANDS = (
    Command("serve", commands.serve, "Serve the HTTP API until SIGTERM/SIGINT.", SERVE_FIELDS),
    Command(
        "keys create",
        keys.create,
        "Create an API key of a named principal; it is shown only once.",
        options=(
            option("--tenant", required=True, help="the tenant the key belongs to"),
            option(
                "--principal",
                help="required: the person or service account the key belongs to; nobody "
                "promotes, rejects or erases what their principal wrote, whichever key",
            ),
            option(
                "--agents",
                required=True,
                help="agents it may act for: a,b or '*' for every agent",
            ),
            option(
                "--scopes",
                required=True,
                help="comma-separated: memory:write, memory:read, memory:review, "
                "subject:forget, audit:read",
            ),
            option(
                "--max-trust",
                help="highest trust it may write: untrusted or trusted (required with "
                "memory:write; a key that does not write needs none)",
            ),
            option("--expires-in", metavar="DURATION", help="expire after 90d, 12h, 30m or 45s"),
            option("--expires-at", metavar="TIMESTAMP", help="expire at an RFC 3339 instant"),
            option("--name", help="a label for people (not secret)"),
            option("--json", action="store_true", help="print one JSON object"),
        ),
    ),
    Command(
        "keys list",
        keys.list_,
        "List API keys: principal, state, created, expires, last used, grants; never secrets.",
        options=(
            option("--tenant", help="only this tenant's keys"),
            option("--json", action="store_true", help="print a JSON array"),
        ),
    ),
    Command(
        "keys revoke",
        keys.revoke,
        "Revoke an API key at once.",
        options=(
            option(
                "key",
                metavar="KEY_ID",
                help="the key id: the 16 hex characters after gmem_ in gmem_<key id>_<secret> "
                "(a whole key is accepted too; only its id is used, never shown)",
            ),
        ),
    ),
    Command(
        "demo",
        commands.demo,
        "Run the lifecycle walkthrough over HTTP against a throwaway store (deleted "
        "afterwards), or under a fresh tenant of the store --data-dir or --database-url "
        "names. GMEM_DATA_DIR and GMEM_DATABASE_URL are not read: the demo never writes to "
        "a configured store unless a flag names it.",
        SERVICE_FIELDS,
        setting_helps={
            "data_dir": "run in this store's folder, under a fresh tenant "
            "(default: a throwaway store)",
            "database_url": "run in this database, under a fresh tenant "
            "(default: a throwaway store)",
        },
    ),
    Command(
        "replay",
        commands.replay,
        "Rebuild the live projection (items and search index) from the log, in place; with "
        "--verify, only rebuild it in memory and compare it with the live one item by item "
        "(read-only).",
        INDEX_FIELDS,
        options=(
            option(
                "--verify",
                action="store_true",
                help="only compare, change nothing; exit 1 on any difference",
            ),
        ),
    ),
    Command(
        "reindex",
        commands.reindex,
        "Rebuild the search index from the log with these search settings (language, "
        "semantic), and record them as the index's.",
        INDEX_FIELDS,
    ),
    Command(
        "expire",
        commands.expire,
        "Expire every item whose TTL has run out, then destroy the content of every item "
        "past its retention window, now.",
        (*STORE_FIELDS, *RETENTION_FIELDS),
    ),
    Command(
        "export",
        commands.export,
        "Write the event log as JSON Lines (content sealed), with the API keys (their "
        "secrets' hashes) and idempotency records, so that an import elsewhere keeps them.",
        options=(
            option("--output", required=True, metavar="FILE", help="file, or - for stdout"),
            option(
                "--without-credentials",
                action="store_true",
                help="leave out the API keys and idempotency records (the log and its keys only)",
            ),
        ),
    ),
    Command(
        "import",
        commands.import_,
        "Load a JSON Lines export into an empty store. The store must use the master key of "
        "the store that was exported: set GMEM_MASTER_KEY to it, or copy its master.key "
        "file beside the new database.",
        INDEX_FIELDS,
        options=(option("file", metavar="FILE", help="file, or - for stdin"),),
    ),
    Command("migrate", commands.migrate, "Apply pending schema migrations."),
    Command(
        "audit verify",
        audit.verify,
        "Recompute every tenant's hash chain from the stored events and name the first "
        "event edited, deleted, inserted or moved in each (read-only, no master key). "
        "Exit 0 when clean, 1 on any break.",
        options=(
            option(
                "--expect",
                action="append",
                metavar="TENANT:POSITION:HASH",
                help="a head recorded earlier with gmem audit head (repeatable): it must "
                "still be in its tenant's chain, which also shows a deleted tail or a "
                "rewritten log",
            ),
        ),
    ),
    Command(
        "audit head",
        audit.head,
        "Print each tenant's head as TENANT:POSITION:HASH (its last event and that "
        "event's hash), to record outside the store and give back to audit verify --expect.",
        options=(option("--json", action="store_true", help="print a JSON array"),),
    ),
)


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The ``gmem`` parser with every command of :data:`COMMANDS`, and ``gmem mcp``."""
    parser = _Parser(prog="gmem", description=description)
    parser.add_argument("--version", action="version", version=f"gmem {__version__}")
    top = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    groups: dict[str, Any] = {}
    for command in COMMANDS:
        *group, name = command.words.split()
        where = top
        if group:
            if group[0] not in groups:
                groups[group[0]] = _group(top, group[0])
            where = groups[group[0]]
        sub: argparse.ArgumentParser = where.add_parser(
            name, help=command.help, description=command.help
        )
        sub.set_defaults(run=command.run)
        add_settings(sub, command.settings, command.setting_helps)
        for extra in command.options:
            sub.add_argument(*extra.names, **extra.keywords)
    add_quarantine_command(top)
    add_mcp_command(top)
    return parser


def _group(subparsers: Any, word: str) -> Any:
    group: argparse.ArgumentParser = subparsers.add_parser(word, help=GROUPS[word])
    return group.add_subparsers(dest=f"{word}_command", metavar="ACTION", required=True)


__all__ = ["COMMANDS", "GROUPS", "Command", "Option", "build_parser", "option"]
