"""The ``gmem`` commands: demo, replay, expire, export, import, migrate, and errors (the
``keys`` commands: ``test_keys.py``)."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from governed_memory import open_service
from governed_memory.store.sqlite.index_rows import pack, unpack
from tests.cli.conftest import Gmem
from tests.support.fakes import FakeClock, body, principal
from tests.support.legacy import write_legacy


def write_items(data_dir: Path, count: int = 2, clock: FakeClock | None = None) -> list[str]:
    """Write ``count`` trusted facts into the store in ``data_dir``; return their ids."""
    service = open_service(data_dir=data_dir, clock=clock)
    try:
        writer = principal()
        return [service.write(writer, body(id=f"m-{n}")).item.id for n in range(count)]
    finally:
        service.close()


def test_demo_walks_the_lifecycle_over_http(
    gmem: Gmem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """demo prints the eight steps of the walkthrough and leaves nothing behind."""
    monkeypatch.chdir(tmp_path)
    run = gmem("demo")
    assert run.status == 0, run.err
    lines = run.out.splitlines()
    steps = [line for line in lines if line[:2] in {f"{n}." for n in range(1, 9)}]
    assert len(steps) == 8
    assert "is active" in steps[0]
    assert "is quarantined" in steps[1]
    assert steps[2].endswith("1 result(s)")
    assert "verified" in steps[3]
    assert steps[4].endswith("2 result(s)")
    assert "2 item(s) deleted" in steps[5]
    assert steps[6].endswith("0 result(s)")
    assert steps[7].endswith("200")
    assert list(tmp_path.iterdir()) == []


def test_replay_verify_is_clean_on_a_healthy_store(gmem: Gmem, tmp_path: Path) -> None:
    """replay --verify rebuilds from the log and finds no difference."""
    write_items(tmp_path)
    run = gmem("replay", "--verify", "--data-dir", str(tmp_path))
    assert run.status == 0
    assert "replay clean: 2 event(s), 2 item(s)" in run.out


def test_replay_verify_fails_on_a_tampered_projection(gmem: Gmem, tmp_path: Path) -> None:
    """A projection row that no longer matches the log makes replay --verify exit 1."""
    write_items(tmp_path)
    with sqlite3.connect(tmp_path / "gmem.sqlite3") as conn:
        conn.execute("UPDATE memories SET confidence = 0.123 WHERE id = 'm-0'")
    run = gmem("replay", "--verify", "--data-dir", str(tmp_path))
    assert run.status == 1
    assert "m-0" in run.out
    assert run.err == "gmem: error: replay found 1 difference(s)\n"
    rebuilt = gmem("replay", "--data-dir", str(tmp_path))
    assert rebuilt.status == 0
    assert gmem("replay", "--verify", "--data-dir", str(tmp_path)).status == 0


def test_replay_verify_fails_on_a_removed_search_row(gmem: Gmem, tmp_path: Path) -> None:
    """An item whose postings are gone is unsearchable: replay --verify names it and exits
    1; replay makes it searchable again (issue 13, defect 6)."""
    write_items(tmp_path)
    with sqlite3.connect(tmp_path / "gmem.sqlite3") as conn:
        conn.execute(
            "DELETE FROM postings WHERE item = (SELECT rowid FROM memories WHERE id = 'm-1')"
        )
    run = gmem("replay", "--verify", "--data-dir", str(tmp_path))
    assert run.status == 1
    assert run.out == "acme/m-1: search rows differ from its content's: postings\n"
    assert run.err == (
        "gmem: error: replay found 1 difference(s); 1 in the search index: "
        "`gmem reindex` rebuilds it from content\n"
    )
    assert gmem("replay", "--data-dir", str(tmp_path)).status == 0
    assert gmem("replay", "--verify", "--data-dir", str(tmp_path)).status == 0


def test_a_drifted_search_document_is_repaired_by_reindex_not_replay(
    gmem: Gmem, tmp_path: Path
) -> None:
    """A document whose frequencies no longer match its content: replay --verify names
    `gmem reindex` as the repair; replay copies the held document (its content is
    unchanged) so verify still fails; reindex tokenizes the content again and verify is
    clean."""
    write_items(tmp_path)
    with sqlite3.connect(tmp_path / "gmem.sqlite3") as conn:
        (rowid,) = conn.execute("SELECT rowid FROM memories WHERE id = 'm-1'").fetchone()
        terms, tfs = conn.execute(
            "SELECT terms, tfs FROM search_docs WHERE item = ?", (rowid,)
        ).fetchone()
        bumped = pack({term: tf + 1 for term, tf in unpack(terms, tfs).items()})[1]
        conn.execute("UPDATE search_docs SET tfs = ? WHERE item = ?", (bumped, rowid))
    run = gmem("replay", "--verify", "--data-dir", str(tmp_path))
    assert run.status == 1 and run.out.startswith("acme/m-1: search rows differ")
    assert "`gmem reindex` rebuilds it from content" in run.err
    assert gmem("replay", "--data-dir", str(tmp_path)).status == 0
    assert gmem("replay", "--verify", "--data-dir", str(tmp_path)).status == 1
    assert gmem("reindex", "--data-dir", str(tmp_path)).status == 0
    clean = gmem("replay", "--verify", "--data-dir", str(tmp_path))
    assert clean.status == 0 and "replay clean" in clean.out


def test_expire_expires_what_is_due(gmem: Gmem, tmp_path: Path) -> None:
    """expire appends memory.expired for each item whose TTL has run out, and counts them."""
    past = FakeClock(datetime.now(UTC) - timedelta(days=800))
    write_items(tmp_path, count=2, clock=past)
    run = gmem("expire", "--data-dir", str(tmp_path))
    assert run.status == 0
    assert run.out.splitlines() == [
        "expired 2 item(s)",
        "destroyed the content of 0 item(s) past retention",
    ]
    assert gmem("expire", "--data-dir", str(tmp_path)).out.splitlines()[0] == "expired 0 item(s)"


def test_expire_applies_retention_and_counts_what_it_skips(gmem: Gmem, tmp_path: Path) -> None:
    """With a retention window of 0 given by its flag, expire destroys the content of what
    it expired; a memory written before items had keys is skipped, and the output says so."""
    past = FakeClock(datetime.now(UTC) - timedelta(days=800))
    write_items(tmp_path, count=2, clock=past)
    service = open_service(data_dir=tmp_path, clock=past)
    try:
        write_legacy(service, principal(), body(id="old"))
    finally:
        service.close()
    run = gmem("expire", "--retention-fact-expired-seconds", "0", "--data-dir", str(tmp_path))
    assert run.status == 0, run.err
    assert run.out.splitlines() == [
        "expired 3 item(s)",
        "destroyed the content of 2 item(s) past retention",
        "skipped 1 item(s) past retention written before items had keys of their own: "
        "only forgetting their subjects destroys their content",
    ]
    service = open_service(data_dir=tmp_path)
    try:
        assert [service.get(principal(), m).content is None for m in ("m-0", "m-1", "old")] == [
            True,
            True,
            False,
        ]
    finally:
        service.close()


def test_export_then_import_moves_a_store(gmem: Gmem, tmp_path: Path) -> None:
    """An export imported into an empty store with the same master key reproduces it."""
    source, target = tmp_path / "source", tmp_path / "target"
    write_items(source, count=3)
    export = tmp_path / "log.jsonl"
    run = gmem("export", "--output", str(export), "--data-dir", str(source))
    assert run.status == 0
    records = [json.loads(line) for line in export.read_text().splitlines()]
    assert [r["record"] for r in records].count("event") == 3
    assert body()["content"] not in export.read_text()  # content stays sealed
    target.mkdir()
    (target / "master.key").write_bytes((source / "master.key").read_bytes())
    run = gmem("import", str(export), "--data-dir", str(target))
    assert run.status == 0, run.err
    assert "imported 3 event(s), 1 subject key(s), 3 item key(s)" in run.out
    service = open_service(data_dir=target)
    try:
        assert service.get(principal(), "m-2").content == body()["content"]
    finally:
        service.close()
    again = gmem("import", str(export), "--data-dir", str(target))
    assert again.status == 1
    assert again.err.startswith("gmem: error: import needs an empty store")


def test_import_of_a_missing_file_fails_in_one_line(gmem: Gmem, tmp_path: Path) -> None:
    """A file that does not exist is one error line naming it."""
    run = gmem("import", str(tmp_path / "missing.jsonl"), "--data-dir", str(tmp_path))
    assert run.status == 1
    assert run.err.count("\n") == 1
    assert "missing.jsonl" in run.err


def test_migrate_reports_the_schema_version(gmem: Gmem, tmp_path: Path) -> None:
    """migrate applies pending migrations and says the schema is up to date."""
    run = gmem("migrate", "--data-dir", str(tmp_path))
    assert run.status == 0
    assert run.out.startswith("schema up to date (schema version ")
    assert (tmp_path / "gmem.sqlite3").exists()


def test_database_url_selects_an_explicit_sqlite_file(gmem: Gmem, tmp_path: Path) -> None:
    """--database-url sqlite:///path puts the store in that file."""
    path = tmp_path / "elsewhere.db"
    run = gmem("migrate", "--database-url", f"sqlite:///{path}")
    assert run.status == 0
    assert path.exists()


def test_a_usage_error_is_one_line_with_status_2(gmem: Gmem) -> None:
    """A missing required flag is one line on stderr and status 2."""
    run = gmem("keys", "create", "--tenant", "acme")
    assert run.status == 2
    assert run.err.count("\n") == 1
    assert run.err.startswith("gmem keys create: error:")
