"""``python -m bench.floor``: a durable write's statements replayed on a copy of the store,
beside the service that made them and the bar's baseline; nothing here is about speed."""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import floor
from tests.conftest import postgres_dsn

#: The store writer's PRAGMAs (``SQLiteDatabase._connect``): WAL, FULL, secure delete.
STORE_PRAGMAS = {"journal_mode": "wal", "synchronous": 2, "secure_delete": 1, "foreign_keys": 0}


def _sides_measured(result: dict[str, Any], sides: tuple[str, ...], writes: int) -> None:
    for side in sides:
        assert result[side]["per_second"] > 0, side
    assert result["writes"] == writes


def test_the_sqlite_replay_is_each_writes_committed_transaction_at_the_stores_durability(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every write is one transaction, replayed whole with the writer's PRAGMAs."""
    assert floor.main(["--writes", "30", "--chunk", "10", "--backend", "sqlite"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    result = json.loads(line)
    _sides_measured(result, ("service", "replay", "raw_full"), 30)
    # BEGIN IMMEDIATE, the key and chain head, the event, the item, its postings and
    # document, its scope's totals, its key, COMMIT
    assert result["statements_a_write"] >= 8
    assert result["statements_outside_a_write"] == 0  # nothing the replay leaves out
    assert result["pragmas"] == STORE_PRAGMAS
    assert {"replay_over_raw_full", "service_over_raw_full"} <= set(result)


class _Sabotaged(sqlite3.Connection):
    """A connection that leaves the postings out, or sets ``synchronous = OFF`` when
    asked for any level."""

    skip_postings = False
    relax_sync = False

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if _Sabotaged.relax_sync and sql.startswith("PRAGMA synchronous ="):
            sql = "PRAGMA synchronous = OFF"
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        if _Sabotaged.skip_postings and "postings" in sql:
            return self.cursor()
        return super().executemany(sql, parameters)


@pytest.fixture
def sabotaged(monkeypatch: pytest.MonkeyPatch) -> type[_Sabotaged]:
    """The connections the floor opens itself (the copy, the baseline) are sabotaged."""
    recording = floor._recording

    @contextlib.contextmanager
    def with_sabotage() -> Iterator[Any]:
        with recording() as connect:
            yield functools.partial(connect, factory=_Sabotaged)

    monkeypatch.setattr(floor, "_recording", with_sabotage)
    monkeypatch.setattr(_Sabotaged, "skip_postings", False)
    monkeypatch.setattr(_Sabotaged, "relax_sync", False)
    return _Sabotaged


def test_a_replay_that_leaves_statements_out_is_refused(sabotaged: type[_Sabotaged]) -> None:
    """The copy is compared with the store, table by table."""
    sabotaged.skip_postings = True
    with pytest.raises(RuntimeError, match="differs from the store in postings"):
        floor.sqlite_floor(20, 10)


def test_a_replay_at_another_durability_is_refused(sabotaged: type[_Sabotaged]) -> None:
    """The replay commits as the store does, or the floor says nothing."""
    sabotaged.relax_sync = True
    with pytest.raises(RuntimeError, match=r"PRAGMAs .* are not the store's"):
        floor.sqlite_floor(20, 10)


def test_a_recording_that_is_not_one_committed_transaction_a_write_is_refused() -> None:
    """A rolled-back or missing transaction would make the replay do other work."""
    begin, commit = ("BEGIN IMMEDIATE", (), False), ("COMMIT", (), False)
    floor._committed([[begin, commit], [begin, commit]], 2)
    with pytest.raises(RuntimeError, match="1 write transactions recorded for 2 writes"):
        floor._committed([[begin, commit]], 2)
    with pytest.raises(RuntimeError, match="did not commit"):
        floor._committed([[begin, commit], [begin, ("ROLLBACK", (), False)]], 2)


def test_the_postgresql_replay_is_one_message_a_write_at_the_servers_durability() -> None:
    """Each write's one message is replayed as it was sent, at the store's
    ``synchronous_commit``."""
    import psycopg

    dsn = postgres_dsn()  # skips without a server, fails in CI
    result = floor.postgres_floor(20, 10, dsn)
    _sides_measured(result, ("service", "replay", "raw_insert", "langgraph"), 20)
    assert result["statements_a_write"] >= 2  # the lock, then the item with its event
    with psycopg.connect(dsn) as conn:
        assert result["synchronous_commit"] == conn.execute("SHOW synchronous_commit").fetchone()[0]
    expected = {
        f"{side}_over_{base}"
        for side in ("replay", "service")
        for base in ("langgraph", "raw_insert")
    }
    assert expected <= set(result)


def test_the_baselines_run_after_the_replay_in_one_turn_and_before_the_service_in_the_next() -> (
    None
):
    """The replay always follows the service it replays; the baselines change place."""
    ran: list[tuple[str, int]] = []

    def side(name: str) -> Any:
        return lambda size: ran.append((name, size))

    writes = {"service": side("service"), "replay": side("replay")}
    figures = floor._turns(25, 10, writes, {"raw": side("raw")})
    assert ran == [
        ("service", 10), ("replay", 10), ("raw", 10),
        ("raw", 10), ("service", 10), ("replay", 10),
        ("service", 5), ("replay", 5), ("raw", 5),
    ]  # fmt: skip
    assert set(figures) == {"service", "replay", "raw"}


def test_a_postgresql_replay_at_another_synchronous_commit_is_refused() -> None:
    """The replay's connection commits as the store's pool does, or the floor says nothing."""
    import psycopg

    dsn = postgres_dsn()
    with (
        psycopg.connect(dsn, autocommit=True) as pooled,
        psycopg.connect(dsn, autocommit=True) as replayer,
    ):
        assert (
            floor._same_durability(pooled, replayer)
            == pooled.execute("SHOW synchronous_commit").fetchone()[0]
        )
        replayer.execute("SET synchronous_commit = off")
        pooled.execute("SET synchronous_commit = on")
        with pytest.raises(RuntimeError, match="synchronous_commit is not the store's"):
            floor._same_durability(pooled, replayer)


def test_a_postgresql_floor_without_a_server_is_refused_in_one_line_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Asked for PostgreSQL (or both) without a server, it says so and how to run SQLite's."""
    monkeypatch.setattr(floor.raw, "postgres_reachable", lambda dsn: "PostgreSQL is not reachable")
    with pytest.raises(SystemExit) as refused:
        floor.main(["--writes", "10"])
    assert refused.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # SQLite's half did not run either
    line = captured.err.strip().splitlines()[-1]
    assert "the PostgreSQL floor cannot run: PostgreSQL is not reachable" in line
    assert "--backend sqlite" in line


def test_a_copy_that_is_not_the_store_is_named_by_its_table(tmp_path: Path) -> None:
    """Rows that differ in one table name that table, and only it."""
    files = [tmp_path / "store.db", tmp_path / "copy.db"]
    for path, rows in zip(files, ([(1, "a"), (2, "b")], [(1, "a"), (2, "c")]), strict=True):
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE same (k INTEGER PRIMARY KEY)")
        conn.execute("INSERT INTO same VALUES (1)")
        conn.execute("CREATE TABLE items (k INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?)", rows)
        conn.commit()
        conn.close()
    assert floor._sqlite_differences(*files) == ["items"]
    assert floor._sqlite_differences(files[0], files[0]) == []


def test_a_postgresql_copy_holds_the_rows_and_sequences_and_a_missing_row_is_named() -> None:
    """The copy starts where the store is, sequences included."""
    import psycopg
    from psycopg import sql

    dsn = postgres_dsn()
    source, target = (f"test_floor_{name}_{uuid.uuid4().hex[:8]}" for name in ("a", "b"))

    def run(text: str, schema: str) -> None:
        conn.execute(sql.SQL(text).format(sql.Identifier(schema)))

    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            for schema in (source, target):
                run("CREATE SCHEMA {}", schema)
                run(
                    "CREATE TABLE {}.items (k BIGINT GENERATED BY DEFAULT AS IDENTITY, v TEXT)",
                    schema,
                )
            run("INSERT INTO {}.items (v) VALUES ('a'), ('b')", source)
            floor._pg_copy(conn, source, target)
            assert floor._pg_differences(conn, source, target) == []
            # the copy's sequence goes on where the store's stopped
            for schema in (source, target):
                run("INSERT INTO {}.items (v) VALUES ('c')", schema)
            assert floor._pg_differences(conn, source, target) == []
            run("DELETE FROM {}.items WHERE v = 'b'", target)
            assert floor._pg_differences(conn, source, target) == ["items"]
        finally:
            for schema in (source, target):
                run("DROP SCHEMA IF EXISTS {} CASCADE", schema)


@pytest.mark.parametrize("option", ["--writes", "--chunk"])
def test_a_count_under_one_is_refused_in_one_line(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A turn or a run of no writes measures nothing."""
    with pytest.raises(SystemExit) as refused:
        floor.main([option, "0", "--backend", "sqlite"])
    assert refused.value.code == 2
    assert f"{option} must be at least 1" in capsys.readouterr().err.strip().splitlines()[-1]
