"""What the storage form alone costs a durable write: the service's statements replayed.

``python -m bench.floor [--writes N] [--chunk C] [--backend sqlite|postgres|both]``

One process, for each backend: a fresh store (SQLite at ``synchronous=FULL``; PostgreSQL
in a schema of its own at the server's settings) in which every subject of the workload
gets its key (``bench.inprocess.first_writes``); a copy of it taken then (SQLite's backup
API; PostgreSQL: a second schema made by the same migrations, every table's rows and
every sequence copied). Then, in turns of ``C``:

- **service**: ``C`` sequential ``MemoryService.write`` calls, the workload of
  ``bench.inprocess.sequential_writes`` (warm subjects, a trusted writer, new items),
  recording what each write's commit sends: SQLite's statements from ``BEGIN
  IMMEDIATE`` to ``COMMIT`` with their parameters, PostgreSQL's one message
  (``store.postgres.exchange.run``'s statements and parameters);
- **replay**: the same statements with the same parameters, sent to the copy by a bare
  loop (SQLite: ``execute``/``executemany`` on a connection with the store's PRAGMAs;
  PostgreSQL: the same ``exchange.run``, one message a write), so the copy goes through
  the same transactions at the same durability with none of the service's Python before
  them: no parsing, tokenizing, sealing, indexing or deciding;
- **baseline**: what the bar is measured against, in the same turns: SQLite's raw
  single-row ``FULL`` commit (``bench.raw``), PostgreSQL's raw single-row insert and
  LangGraph's ``PostgresStore`` puts (``bench.peer``).

At the end the copy must hold exactly what the store holds (every table compared row by
row), else the run fails: the replay did the service's work. Printed: one JSON object per
backend with each side's writes/s and CPU a write, and the ratios the bars use (SPEC §12:
durable SQLite writes ≥ 0.5× the raw ``FULL`` commit; PostgreSQL writes ≥ 0.75×
LangGraph's puts). The replay's rate is the most any cut of the service's Python alone
could reach with this storage form on this machine at that moment; where it is under a
bar, the bar needs fewer or cheaper statements, not faster Python.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import secrets
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.inprocess import SEQUENTIAL_OFFSET, first_writes
from bench.loading import writer
from bench.workload import Workload

CHUNK = 50  # writes a turn

#: One recorded SQLite statement: its text, its parameters, whether ``executemany``.
SQLiteStatement = tuple[str, Any, bool]


class _Clock:
    """Wall and process CPU seconds summed over the turns of one side."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.count = 0

    @contextlib.contextmanager
    def turn(self, count: int) -> Iterator[None]:
        cpu, wall = time.process_time(), time.perf_counter()
        yield
        self.wall += time.perf_counter() - wall
        self.cpu += time.process_time() - cpu
        self.count += count

    def figures(self) -> dict[str, float]:
        return {
            "per_second": round(self.count / self.wall, 1),
            "ms_a_write": round(self.wall * 1000 / self.count, 4),
            "cpu_ms_a_write": round(self.cpu * 1000 / self.count, 4),
        }


def _turns(count: int, chunk: int, sides: dict[str, Callable[[int], None]]) -> dict[str, Any]:
    """Each side ``chunk`` at a time, in the order given (the service first: the replay
    replays what it recorded), until each made ``count``."""
    clocks = {name: _Clock() for name in sides}
    done = 0
    while done < count:
        size = min(chunk, count - done)
        for name, side in sides.items():
            with clocks[name].turn(size):
                side(size)
        done += size
    return {name: clock.figures() for name, clock in clocks.items()}


def _bodies(count: int) -> tuple[list[Any], list[tuple[Any, dict[str, Any]]]]:
    items = Workload().items(SEQUENTIAL_OFFSET, SEQUENTIAL_OFFSET + count)
    return items, [(writer(item.tenant_id), item.body()) for item in items]


# -- SQLite -----------------------------------------------------------------------------


class _Recording(sqlite3.Connection):
    """A connection that records each write transaction's statements while ``sink`` is
    set: from ``BEGIN IMMEDIATE`` to ``COMMIT``, one list a transaction."""

    sink: list[list[SQLiteStatement]] | None = None

    def _record(self, sql: str, parameters: Any, many: bool) -> None:
        sink = _Recording.sink
        if sink is None:
            return
        if sql == "BEGIN IMMEDIATE":
            sink.append([])
        if sink:
            sink[-1].append((sql, parameters, many))

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self._record(sql, parameters, False)
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        rows = list(parameters)
        self._record(sql, rows, True)
        return super().executemany(sql, rows)


def _sqlite_connection(
    path: Path, connect: Callable[..., sqlite3.Connection]
) -> sqlite3.Connection:
    """A connection with the PRAGMAs the store gives its own (``SQLiteDatabase._connect``)."""
    conn = connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("PRAGMA foreign_keys = OFF")
    return conn


def _sqlite_differences(store: Path, copy: Path) -> list[str]:
    """The tables whose rows differ between the two files."""
    conn = sqlite3.connect(store)
    try:
        conn.execute("ATTACH DATABASE ? AS copy", (str(copy),))
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM main.sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        differing = []
        for table in tables:
            one = f"SELECT * FROM main.{table} EXCEPT SELECT * FROM copy.{table}"
            other = f"SELECT * FROM copy.{table} EXCEPT SELECT * FROM main.{table}"
            if conn.execute(f"SELECT EXISTS ({one}) OR EXISTS ({other})").fetchone()[0]:
                differing.append(table)
        return differing
    finally:
        conn.close()


def sqlite_floor(count: int, chunk: int) -> dict[str, Any]:
    from governed_memory.bootstrap import open_service
    from governed_memory.store.sqlite import DATABASE_FILE

    connect = sqlite3.connect
    items, bodies = _bodies(count)
    recorded: list[list[SQLiteStatement]] = []
    with tempfile.TemporaryDirectory() as scratch, contextlib.ExitStack() as stack:
        folder, copy, raw_path = (
            Path(scratch) / "store",
            Path(scratch) / "copy.db",
            Path(scratch) / "raw.db",
        )
        sqlite3.connect = functools.partial(connect, factory=_Recording)  # type: ignore[assignment]
        stack.callback(setattr, sqlite3, "connect", connect)
        service = open_service(data_dir=folder, synchronous="FULL")
        stack.callback(service.store.close)
        first_writes(service, items)
        source, target = connect(folder / DATABASE_FILE), connect(copy)
        source.backup(target)
        source.close()
        target.close()
        replayer = stack.enter_context(contextlib.closing(_sqlite_connection(copy, connect)))
        raw = stack.enter_context(contextlib.closing(_sqlite_connection(raw_path, connect)))
        raw.execute("CREATE TABLE raw (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, body TEXT)")
        raw.execute("CREATE INDEX raw_by_tenant ON raw (tenant_id, id)")
        pending = iter(bodies)
        keys = iter(str(uuid.uuid4()) for _ in range(count))
        next_replayed = 0

        def service_writes(size: int) -> None:
            _Recording.sink = recorded
            try:
                for principal, body in (next(pending) for _ in range(size)):
                    service.write(principal, body)
            finally:
                _Recording.sink = None

        def replay(size: int) -> None:
            nonlocal next_replayed
            transactions = recorded[next_replayed:]
            next_replayed = len(recorded)
            for transaction in transactions:
                for sql, parameters, many in transaction:
                    if many:
                        replayer.executemany(sql, parameters)
                    else:
                        replayer.execute(sql, parameters).fetchall()

        def raw_commits(size: int) -> None:
            for number, key in zip(range(size), keys, strict=False):
                raw.execute("BEGIN IMMEDIATE")
                raw.execute(
                    "INSERT INTO raw (id, tenant_id, body) VALUES (?, ?, ?)",
                    (key, f"t{number % 1000:04d}", "x" * 300),
                )
                raw.execute("COMMIT")

        figures = _turns(
            count, chunk, {"service": service_writes, "replay": replay, "raw_full": raw_commits}
        )
        if len(recorded) != count:
            raise RuntimeError(f"{len(recorded)} write transactions recorded for {count} writes")
        service.store.close()
        replayer.close()
        differing = _sqlite_differences(folder / DATABASE_FILE, copy)
    if differing:
        raise RuntimeError(f"the replay's copy differs from the store in {', '.join(differing)}")
    statements = sum(len(t) for t in recorded) / count
    # What the service's own Python costs a write (its CPU beyond the statements'): with
    # the GIL, writer threads of one process cannot together write faster than one a
    # this-many milliseconds, however their commits are grouped.
    python = figures["service"]["cpu_ms_a_write"] - figures["replay"]["cpu_ms_a_write"]
    return {
        "backend": "sqlite",
        "writes": count,
        "statements_a_write": round(statements, 2),
        "python_cpu_ms_a_write": round(python, 4),
        "gil_bound_over_sequential": round(figures["service"]["ms_a_write"] / python, 3),
        **figures,
        "service_over_raw_full": round(
            figures["service"]["per_second"] / figures["raw_full"]["per_second"], 3
        ),
        "replay_over_raw_full": round(
            figures["replay"]["per_second"] / figures["raw_full"]["per_second"], 3
        ),
        "bar": "durable writes ≥ 0.5× the raw FULL commit",
    }


# -- PostgreSQL -------------------------------------------------------------------------


def _pg_copy(conn: Any, source: str, target: str) -> None:
    """Every row of ``source``'s tables into ``target``'s (made by the same migrations),
    and each sequence set where ``source``'s is."""
    tables = [
        name
        for (name,) in conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = %s AND table_type = 'BASE TABLE' ORDER BY table_name",
            (source,),
        )
    ]
    for table in tables:
        # the migrations' own rows (their versions, the store's metadata) come again
        if conn.execute(f"SELECT EXISTS (SELECT FROM {target}.{table})").fetchone()[0]:
            conn.execute(f"DELETE FROM {target}.{table}")
        conn.execute(
            f"INSERT INTO {target}.{table} OVERRIDING SYSTEM VALUE SELECT * FROM {source}.{table}"
        )
    sequences = [
        name
        for (name,) in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relkind = 'S' AND n.nspname = %s",  # identity columns' too
            (source,),
        )
    ]
    for sequence in sequences:
        last, called = conn.execute(
            f"SELECT last_value, is_called FROM {source}.{sequence}"
        ).fetchone()
        conn.execute("SELECT setval(%s, %s, %s)", (f"{target}.{sequence}", last, called))


def _pg_differences(conn: Any, source: str, target: str) -> list[str]:
    tables = [
        name
        for (name,) in conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = %s AND table_type = 'BASE TABLE' ORDER BY table_name",
            (source,),
        )
    ]
    differing = []
    for table in tables:
        one = f"SELECT * FROM {source}.{table} EXCEPT ALL SELECT * FROM {target}.{table}"
        other = f"SELECT * FROM {target}.{table} EXCEPT ALL SELECT * FROM {source}.{table}"
        if conn.execute(f"SELECT EXISTS ({one}) OR EXISTS ({other})").fetchone()[0]:
            differing.append(table)
    return differing


def postgres_floor(count: int, chunk: int, dsn: str) -> dict[str, Any]:
    import psycopg

    from bench import peer
    from bench.postgres import _drop, _open
    from governed_memory.crypto import Keyring
    from governed_memory.service import MemoryService
    from governed_memory.store.postgres import exchange

    items, bodies = _bodies(count)
    tag = f"{uuid.uuid4().hex[:8]}"
    schemas = {name: f"bench_floor_{name}_{tag}" for name in ("store", "copy", "raw")}
    recorded: list[Sequence[Any]] = []
    recording = False
    run = exchange.run

    def record(conn: Any, statements: Sequence[Any]) -> Any:
        if recording:
            recorded.append(list(statements))
        return run(conn, statements)

    with contextlib.ExitStack() as stack:
        for schema in schemas.values():
            stack.callback(_drop, dsn, schema)
        admin = stack.enter_context(psycopg.connect(dsn, autocommit=True))
        store = _open(dsn, schemas["store"])
        stack.callback(store.close)
        _open(dsn, schemas["copy"]).close()  # the same migrations, no rows
        service = MemoryService(store, Keyring(secrets.token_bytes(32)))
        exchange.run = record  # type: ignore[assignment]
        stack.callback(setattr, exchange, "run", run)
        first_writes(service, items)
        _pg_copy(admin, schemas["store"], schemas["copy"])
        replayer = stack.enter_context(psycopg.connect(dsn, autocommit=True))
        replayer.execute(f"SET search_path TO {schemas['copy']}")
        admin.execute(f"CREATE SCHEMA {schemas['raw']}")
        columns = "id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, body TEXT"  # as bench.raw's
        admin.execute(f"CREATE TABLE {schemas['raw']}.raw ({columns})")
        admin.execute(f"CREATE INDEX ON {schemas['raw']}.raw (tenant_id, id)")
        raw = stack.enter_context(psycopg.connect(dsn, autocommit=True))
        raw.execute("SET synchronous_commit = on")
        langgraph = stack.enter_context(peer.postgres_store(dsn))
        pending = iter(bodies)
        puts = iter([(peer.namespace(i), i.memory_id, peer.value(i)) for i in items])
        keys = iter(str(uuid.uuid4()) for _ in range(count))
        next_replayed = 0

        def service_writes(size: int) -> None:
            nonlocal recording
            recording = True
            try:
                for principal, body in (next(pending) for _ in range(size)):
                    service.write(principal, body)
            finally:
                recording = False

        def replay(size: int) -> None:
            nonlocal next_replayed
            messages = recorded[next_replayed:]
            next_replayed = len(recorded)
            for statements in messages:
                run(replayer, statements)

        def raw_inserts(size: int) -> None:
            sql = f"INSERT INTO {schemas['raw']}.raw (id, tenant_id, body) VALUES (%s, %s, %s)"
            with raw.cursor() as cursor:
                for number, key in zip(range(size), keys, strict=False):
                    cursor.execute(sql, (key, f"t{number % 1000:04d}", "x" * 300))

        def langgraph_puts(size: int) -> None:
            for namespace, key, value in (next(puts) for _ in range(size)):
                langgraph.put(namespace, key, value)

        figures = _turns(
            count,
            chunk,
            {
                "service": service_writes,
                "replay": replay,
                "raw_insert": raw_inserts,
                "langgraph": langgraph_puts,
            },
        )
        if len(recorded) != count:
            raise RuntimeError(f"{len(recorded)} write messages recorded for {count} writes")
        differing = _pg_differences(admin, schemas["store"], schemas["copy"])
    if differing:
        raise RuntimeError(f"the replay's copy differs from the store in {', '.join(differing)}")
    statements = sum(len(m) for m in recorded) / count
    rate = {name: figures[name]["per_second"] for name in figures}
    return {
        "backend": "postgres",
        "writes": count,
        "statements_a_write": round(statements, 2),
        **figures,
        "service_over_langgraph": round(rate["service"] / rate["langgraph"], 3),
        "replay_over_langgraph": round(rate["replay"] / rate["langgraph"], 3),
        "service_over_raw_insert": round(rate["service"] / rate["raw_insert"], 3),
        "replay_over_raw_insert": round(rate["replay"] / rate["raw_insert"], 3),
        "bar": "durable writes ≥ 0.75× LangGraph's PostgresStore puts",
    }


def main(argv: list[str] | None = None) -> int:
    from bench.raw import postgres_dsn, postgres_reachable

    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--writes", type=int, default=3_000, help="writes by each side")
    parser.add_argument("--chunk", type=int, default=CHUNK, help="writes a turn")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    args = parser.parse_args(argv)
    for option in ("writes", "chunk"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be at least 1")
    if args.backend in ("sqlite", "both"):
        print(json.dumps(sqlite_floor(args.writes, args.chunk)), flush=True)
    if args.backend in ("postgres", "both"):
        dsn = postgres_dsn()
        unreachable = postgres_reachable(dsn)
        if unreachable is not None:
            parser.exit(2, f"python -m bench.floor: error: {unreachable}\n")
        print(json.dumps(postgres_floor(args.writes, args.chunk, dsn)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
