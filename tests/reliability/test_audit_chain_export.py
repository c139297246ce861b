"""The hash chain in exports (issue 13): event records carry it, an import verifies it
before writing anything and refuses a tampered file in one line naming its first bad
record; the imported store keeps the heads of the store exported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from governed_memory.crypto import Keyring
from governed_memory.errors import ValidationError
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from governed_memory.service.chain_audit import EDITED, MISPLACED, chain_heads, verify_chain
from governed_memory.store.sqlite import SQLiteStore
from tests.reliability.test_audit_chain import seeded, sql_store
from tests.support.fakes import FakeClock

__all__ = ["sql_store"]  # the fixture, shared with test_audit_chain


def exported(store: Store) -> list[str]:
    """The lines of an export of :func:`seeded`'s two tenants."""
    service = seeded(store)
    return [json.dumps(record) for record in service.maintenance.export()]


def import_into(tmp_path: Path, lines: list[str]) -> tuple[Store, str | None]:
    """Import ``lines`` into a fresh SQLite store: the store, and the refusal if any."""
    target = SQLiteStore(tmp_path / "imported.sqlite3")
    service = MemoryService(target, Keyring(bytes(range(32))), clock=FakeClock())
    try:
        service.maintenance.import_log(lines)
    except ValidationError as error:
        return target, error.detail
    return target, None


def event_line(lines: list[str], position: int) -> int:
    return next(i for i, line in enumerate(lines) if json.loads(line).get("position") == position)


def test_an_export_carries_the_chain_and_its_import_keeps_the_heads(
    sql_store: Store, tmp_path: Path
) -> None:
    """Each exported event holds its prev hash and hash; the imported store verifies
    clean and has the same heads as the store exported (PostgreSQL → SQLite too)."""
    lines = exported(sql_store)
    links = {link.position: link for link in sql_store.chain_links(None, 0, 10)}
    for line in lines:
        record = json.loads(line)
        if record["record"] == "event":
            link = links[record["position"]]
            assert (record["prev_hash"], record["hash"]) == (
                (link.prev_hash or b"").hex(),
                (link.hash or b"").hex(),
            )
    target, refused = import_into(tmp_path, lines)
    try:
        assert refused is None
        assert verify_chain(target).ok
        assert chain_heads(target) == chain_heads(sql_store)
    finally:
        target.close()


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ("edit", EDITED),
        ("delete", MISPLACED),
        ("swap", MISPLACED),
    ],
    ids=["edited", "deleted", "swapped"],
)
def test_an_import_refuses_a_tampered_export_naming_the_first_bad_record(
    tmp_path: Path, change: str, problem: str
) -> None:
    """An export with an event edited, deleted or two swapped is refused in one line that
    names the record's line, tenant and position; nothing is written."""
    source = SQLiteStore(tmp_path / "source.sqlite3")
    lines = exported(source)
    source.close()
    second, fourth = event_line(lines, 2), event_line(lines, 4)
    if change == "edit":
        record = json.loads(lines[second])
        record["actor"] = "someone-else"
        lines[second] = json.dumps(record)
        expected = (second + 1, 2)
    elif change == "delete":
        del lines[second]
        expected = (event_line(lines, 4) + 1, 4)
    else:
        lines[second], lines[fourth] = lines[fourth], lines[second]
        for index, position in ((second, 2), (fourth, 4)):
            record = json.loads(lines[index])
            record["position"] = position
            lines[index] = json.dumps(record)
        expected = (second + 1, 2)
    target, refused = import_into(tmp_path, lines)
    try:
        assert refused == (
            f"line {expected[0]} breaks the hash chain of tenant 'acme' at position "
            f"{expected[1]}: {problem}; nothing was imported"
        )
        assert target.head() == 0
    finally:
        target.close()


def test_an_export_from_before_the_chain_imports_and_a_partly_chained_one_does_not(
    tmp_path: Path,
) -> None:
    """Without any hashes (an export made before the chain) the events are imported and
    chained as they are written; with the hashes stripped from one event only, refused."""
    source = SQLiteStore(tmp_path / "source.sqlite3")
    lines = exported(source)
    source.close()

    def stripped(line: str) -> str:
        record = json.loads(line)
        record.pop("prev_hash", None)
        record.pop("hash", None)
        return json.dumps(record)

    partly = list(lines)
    partly[event_line(lines, 4)] = stripped(partly[event_line(lines, 4)])
    target, refused = import_into(tmp_path / "partly", partly)
    assert refused is not None and refused.startswith(f"line {event_line(lines, 4) + 1} lacks")
    target.close()
    target, refused = import_into(tmp_path / "old", [stripped(line) for line in lines])
    try:
        assert refused is None and verify_chain(target).ok
    finally:
        target.close()
