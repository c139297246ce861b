"""``gmem quarantine list|show|promote|reject``: the review queue for reviewers in a terminal.

These commands do not open a store: they talk to a running service over its HTTP API
with the Python client (:mod:`governed_memory.client`), under a reviewer's API key (scope
``memory:review``), so a reviewer needs neither file nor database access and every rule
of review (four eyes, versions, agents) is the service's. The service and the key come
from ``--url`` / ``GMEM_URL`` and ``--api-key`` / ``GMEM_API_KEY``, as for ``gmem mcp``.
A refusal prints the service's problem detail as the one error line.

What a reviewer reads is untrusted by definition: every text from the service is printed
through :func:`printable`, so control and direction characters an agent stored (escape
sequences that hide text, move the cursor or write the clipboard) show as escapes
instead of acting on the reviewer's terminal. ``--json`` output is escaped by JSON.
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime
from typing import Any, TextIO

from governed_memory.cli.commands import CommandError
from governed_memory.cli.options import positive_count
from governed_memory.client import API_KEY_VARIABLE, DEFAULT_URL, URL_VARIABLE, Client
from governed_memory.core.model import MemoryItem
from governed_memory.errors import PermissionDenied

HELP = "Review the quarantine over the HTTP API: list, show, promote, reject."
#: The most items one page of the queue holds (the service's maximum).
PAGE = 500
COLUMNS = ("ID", "AGENT", "SUBJECT", "KIND", "AGE", "TRUST", "VERSION")


def connect(args: argparse.Namespace) -> Client:
    """A client of the service the flags or ``GMEM_*`` variables name, with their key."""
    api_key = args.api_key or os.environ.get(API_KEY_VARIABLE)
    if not api_key:
        raise CommandError(
            f"set {API_KEY_VARIABLE} to a reviewer's API key (scope memory:review), "
            "or pass --api-key"
        )
    return Client(args.url or os.environ.get(URL_VARIABLE) or DEFAULT_URL, api_key)


#: Bidirectional controls, which reorder how a line reads without changing its text.
_BIDI = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A)) | {0x200E, 0x200F}


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab (C0, DEL, C1) and every
    bidirectional control written as an escape (``\\x1b``, ``\\u202e``)."""
    return "".join(
        char
        if char in "\n\t"
        or not (ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 or ord(char) in _BIDI)
        else (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")
        for char in text
    )


def age(since: datetime, now: datetime) -> str:
    """How long ago ``since`` was, in the largest whole unit: ``45s``, ``12m``, ``3h``, ``2d``."""
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def table(items: list[MemoryItem], now: datetime) -> list[str]:
    """The queue as aligned lines: a header, then one row per item."""
    rows = [COLUMNS] + [
        (
            item.id,
            item.agent_id,
            item.subject_id,
            item.kind.value,
            age(item.updated_at, now),
            item.trust.value,
            str(item.version),
        )
        for item in items
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(COLUMNS))]
    return [
        printable("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))).rstrip()
        for row in rows
    ]


def list_(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem quarantine list``: one page of the queue, oldest first."""
    with connect(args) as client:
        page = client.list_quarantine(
            agent_id=args.agent, purpose=args.purpose, limit=args.limit, cursor=args.cursor
        )
    if args.json:
        print(json.dumps(page.to_dict()), file=out)
        return 0
    if not page.items:
        print("the quarantine is empty" if args.cursor is None else "no more items", file=out)
        return 0
    for line in table(page.items, datetime.now(UTC)):
        print(line, file=out)
    if page.next_cursor is not None:
        print(f"more: gmem quarantine list --cursor {page.next_cursor}", file=out)
    return 0


def find(client: Client, memory_id: str) -> MemoryItem:
    """The item as the service shows it to this key: by id, or (a key without
    ``memory:read``) from the review queue."""
    try:
        return client.get(memory_id)
    except PermissionDenied as error:
        if "memory:read" not in error.detail:
            raise
    cursor = None
    while True:
        page = client.list_quarantine(limit=PAGE, cursor=cursor)
        for item in page.items:
            if item.id == memory_id:
                return item
        if page.next_cursor is None:
            raise CommandError(
                f"memory {memory_id!r} is not in this key's review queue (reviewed already, "
                "or of an agent the key does not act for)"
            )
        cursor = page.next_cursor


def show(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem quarantine show``: one item, its content included (reviewers read it)."""
    with connect(args) as client:
        item = find(client, args.memory_id)
    if args.json:
        print(json.dumps(item.to_dict()), file=out)
        return 0
    for name, value in describe(item, datetime.now(UTC)):
        print(f"{name + ':':<12} {printable(str(value))}", file=out)
    print("", file=out)
    print("(content destroyed)" if item.content is None else printable(item.content), file=out)
    return 0


def describe(item: MemoryItem, now: datetime) -> list[tuple[str, Any]]:
    """The fields ``show`` prints above the content."""
    return [
        ("id", item.id),
        ("status", item.status.value),
        ("trust", item.trust.value),
        ("version", item.version),
        ("agent", item.agent_id),
        ("subject", item.subject_id),
        ("purpose", item.purpose),
        ("kind", item.kind.value),
        ("confidence", f"{item.confidence:.2f}"),
        ("provenance", f"{item.provenance.source} {item.provenance.ref}"),
        ("written", f"{item.updated_at:%Y-%m-%dT%H:%M:%SZ} ({age(item.updated_at, now)} ago)"),
        ("expires", f"{item.expires_at:%Y-%m-%dT%H:%M:%SZ}"),
        ("supersedes", item.supersedes_id or "-"),
    ]


def promote(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem quarantine promote``: the item becomes active and verified."""
    with connect(args) as client:
        item = client.promote(args.memory_id, args.expected_version)
    print(f"promoted {item.id}: {item.status.value}, {item.trust.value}, v{item.version}", file=out)
    return 0


def reject(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem quarantine reject``: the item is rejected, the reason stored sealed."""
    with connect(args) as client:
        item = client.reject(args.memory_id, args.expected_version, args.reason)
    print(f"rejected {item.id}: {item.status.value}, v{item.version}", file=out)
    return 0


def add_command(subparsers: Any) -> None:
    """Add ``gmem quarantine list|show|promote|reject`` to the ``gmem`` parser."""
    group = subparsers.add_parser("quarantine", help=HELP, description=HELP)
    actions = group.add_subparsers(dest="quarantine_command", metavar="ACTION", required=True)
    for name, run, text in (
        (
            "list",
            list_,
            "List the review queue, oldest first: id, agent, subject, kind, age, trust, version.",
        ),
        ("show", show, "Show one quarantined item with its content."),
        ("promote", promote, "Promote a quarantined item: it becomes active and verified."),
        ("reject", reject, "Reject a quarantined item, with an optional reason."),
    ):
        parser = actions.add_parser(name, help=text, description=text + " " + CONNECTION)
        parser.set_defaults(run=run)
        _connection(parser)
        OPTIONS[name](parser)


CONNECTION = (
    f"Talks to the running service at --url ({URL_VARIABLE}, default {DEFAULT_URL}) with "
    f"a reviewer's API key ({API_KEY_VARIABLE}; scope memory:review)."
)


def _connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help=f"the service's base URL ({URL_VARIABLE})")
    parser.add_argument(
        "--api-key",
        help=f"a reviewer's API key ({API_KEY_VARIABLE}; prefer the variable: command "
        "lines are visible to other users of the machine)",
    )


def _list_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent", help="only items of this agent")
    parser.add_argument("--purpose", help="only items of this purpose")
    parser.add_argument(
        "--limit", type=positive_count, help=f"items per page (1..{PAGE}, default 50)"
    )
    parser.add_argument("--cursor", help="the page after this cursor (printed after a page)")
    parser.add_argument("--json", action="store_true", help="print the page as JSON")


def _show_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("memory_id", metavar="ID", help="the memory's id")
    parser.add_argument("--json", action="store_true", help="print the item as JSON")


def _review_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("memory_id", metavar="ID", help="the memory's id")
    parser.add_argument(
        "--expected-version",
        type=positive_count,
        metavar="N",
        required=True,
        help="the version you reviewed (from list or show): refused if the item changed "
        "since, so a rewrite made after your review is never promoted or rejected unseen",
    )


def _reject_options(parser: argparse.ArgumentParser) -> None:
    _review_options(parser)
    parser.add_argument("--reason", help="why (stored sealed; shown in the item's history)")


OPTIONS = {
    "list": _list_options,
    "show": _show_options,
    "promote": _review_options,
    "reject": _reject_options,
}

__all__ = ["add_command", "age", "find", "list_", "promote", "reject", "show", "table"]
