"""What the storage form alone costs a durable write: the service's statements replayed.

``python -m bench.floor [--writes N] [--chunk C] [--backend sqlite|postgres|both]``

One process, for each backend: a fresh store (SQLite at ``synchronous=FULL``; PostgreSQL
in a schema of its own at the server's settings) in which every subject of the workload
gets its key (``bench.inprocess.first_writes``), and a copy of it taken then (SQLite's
backup API; PostgreSQL: a second schema made by the same migrations, every table's rows
and every sequence copied). Then, in turns of ``C``:

- **service**: ``C`` sequential ``MemoryService.write`` calls, the workload of
  ``bench.inprocess.sequential_writes`` (warm subjects, a trusted writer, new items),
  recording what each write's commit sends: SQLite's statements from ``BEGIN
  IMMEDIATE`` to ``COMMIT`` with their parameters, PostgreSQL's one message
  (``store.postgres.exchange.run``'s statements and parameters);
- **replay**: the same statements with the same parameters, sent to the copy by a bare
  loop (SQLite: ``execute``/``executemany`` on a connection given the store writer's
  PRAGMAs, checked equal; PostgreSQL: the same ``exchange.run`` on a connection like the
  pool's, one message a write, at the same ``synchronous_commit``), so the copy goes
  through the same transactions at the same durability with none of the service's
  Python before them: no parsing, tokenizing, sealing, indexing or deciding;
- **baselines**: what the write bars are measured against, in the same turns: SQLite's
  raw single-row ``FULL`` commit; PostgreSQL's raw single-row insert and LangGraph's
  ``PostgresStore`` puts (``bench.raw``, ``bench.peer``).

The baselines go after the replay in even turns and before the service in odd ones. The
run fails unless every recorded transaction committed, and unless the copy ends equal to
the store, every table compared row by row: the replay did the service's work. Printed:
one JSON object per backend with each side's writes/s and CPU a write, and the replay's
and the service's rates over the baselines'. The replay's rate is the most a sequential
durable write of this storage form reaches on this machine at that moment, whatever the
service's Python costs; where it is under a write bar, that bar needs fewer or cheaper
statements, not only faster Python.
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

from bench import raw
from bench.inprocess import SEQUENTIAL_OFFSET, first_writes
from bench.loading import writer
from bench.workload import Workload

CHUNK = 50  # writes a turn
#: The writer's PRAGMAs the replay takes over, and checks (``SQLiteDatabase._connect``).
PRAGMAS = ("journal_mode", "synchronous", "secure_delete", "foreign_keys")

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


def _turns(
    count: int,
    chunk: int,
    writes: dict[str, Callable[[int], None]],
    baselines: dict[str, Callable[[int], None]],
) -> dict[str, Any]:
    """``count`` writes a side, ``chunk`` a turn: the service then its replay (which
    replays what the service just recorded), the baselines after them in even turns and
    before them in odd ones."""
    clocks = {name: _Clock() for name in [*writes, *baselines]}
    done = 0
    while done < count:
        size = min(chunk, count - done)
        order = [*writes.items(), *baselines.items()]
        if done // chunk % 2:
            order = [*baselines.items(), *writes.items()]
        for name, side in order:
            with clocks[name].turn(size):
                side(size)
        done += size
    return {name: clock.figures() for name, clock in clocks.items()}


def _ratios(figures: dict[str, Any], bases: Sequence[str]) -> dict[str, float]:
    """The replay's and the service's rates over each baseline's, as ``replay_over_…``."""
    return {
        f"{side}_over_{base}": round(figures[side]["per_second"] / figures[base]["per_second"], 3)
        for side in ("replay", "service")
        for base in bases
    }


def _turn_of(recorded: list[Any], replayed: int, size: int, each: str) -> list[Any]:
    """What the service recorded since ``replayed``: one ``each`` for each of its ``size``
    writes, or the turn is refused."""
    if len(recorded) != replayed + size:
        raise RuntimeError(f"a turn's writes were not one {each} each")
    return recorded[replayed:]


def _result(
    backend: str,
    recorded: list[Any],
    differing: list[str],
    figures: dict[str, Any],
    bases: Sequence[str],
    **detail: Any,
) -> dict[str, Any]:
    """A backend's JSON object, once the copy is found equal to the store."""
    if differing:
        raise RuntimeError(f"the replay's copy differs from the store in {', '.join(differing)}")
    writes = len(recorded)
    return {
        "backend": backend,
        "writes": writes,
        "statements_a_write": round(sum(len(r) for r in recorded) / writes, 2),
        **detail,
        **figures,
        **_ratios(figures, bases),
    }


def _bodies(count: int) -> tuple[list[Any], list[tuple[Any, dict[str, Any]]]]:
    items = Workload().items(SEQUENTIAL_OFFSET, SEQUENTIAL_OFFSET + count)
    return items, [(writer(item.tenant_id), item.body()) for item in items]


# -- SQLite -----------------------------------------------------------------------------


class _Recording(sqlite3.Connection):
    """A connection that, while ``transactions`` is set, records each of its write
    transactions (from ``BEGIN IMMEDIATE`` to ``COMMIT`` or ``ROLLBACK``) as a list of
    statements, and counts the statements it runs outside one in ``outside``."""

    transactions: list[list[SQLiteStatement]] | None = None
    outside = 0

    def _record(self, sql: str, parameters: Any, many: bool) -> None:
        transactions = _Recording.transactions
        if transactions is None:
            return
        current: list[SQLiteStatement] | None = getattr(self, "_current", None)
        if sql == "BEGIN IMMEDIATE":
            current = self._current = []
            transactions.append(current)
        if current is None:
            _Recording.outside += 1
            return
        current.append((sql, parameters, many))
        if sql in ("COMMIT", "ROLLBACK"):
            self._current = None

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self._record(sql, parameters, False)
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        rows = list(parameters)
        self._record(sql, rows, True)
        return super().executemany(sql, rows)


@contextlib.contextmanager
def _recording() -> Iterator[Callable[..., sqlite3.Connection]]:
    """Every connection ``sqlite3.connect`` opens inside the block is a :class:`_Recording`
    one; yields the plain ``connect``."""
    connect = sqlite3.connect
    sqlite3.connect = functools.partial(connect, factory=_Recording)  # type: ignore[assignment]
    try:
        yield connect
    finally:
        sqlite3.connect = connect  # type: ignore[assignment]


def _pragmas(conn: sqlite3.Connection) -> dict[str, Any]:
    return {name: conn.execute(f"PRAGMA {name}").fetchone()[0] for name in PRAGMAS}


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


def _committed(transactions: list[list[SQLiteStatement]], count: int) -> None:
    """Refuse a recording that is not one committed transaction a write."""
    if len(transactions) != count:
        raise RuntimeError(f"{len(transactions)} write transactions recorded for {count} writes")
    if any(not t or t[-1][0] != "COMMIT" for t in transactions):
        raise RuntimeError("a recorded write transaction did not commit")


def sqlite_floor(count: int, chunk: int) -> dict[str, Any]:
    """The SQLite floor: the service, its replay and the raw ``FULL`` commit in turns."""
    from governed_memory.bootstrap import open_service
    from governed_memory.store.sqlite import DATABASE_FILE

    items, bodies = _bodies(count)
    transactions: list[list[SQLiteStatement]] = []
    with (
        tempfile.TemporaryDirectory() as scratch,
        _recording() as connect,
        contextlib.ExitStack() as stack,
    ):
        folder, copy = Path(scratch) / "store", Path(scratch) / "copy.db"
        service = open_service(data_dir=folder, synchronous="FULL")
        stack.callback(service.store.close)
        first_writes(service, items)
        source, target = connect(folder / DATABASE_FILE), connect(copy)
        source.backup(target)  # what the writes find: committed, the WAL's pages included
        source.close()
        target.close()
        writer_conn = service.store.database.writer
        replayer = stack.enter_context(contextlib.closing(connect(copy, isolation_level=None)))
        for name, value in _pragmas(writer_conn).items():
            replayer.execute(f"PRAGMA {name} = {value}")
        if _pragmas(replayer) != _pragmas(writer_conn):
            raise RuntimeError(
                f"the replay's PRAGMAs {_pragmas(replayer)} are not the store's"
                f" {_pragmas(writer_conn)}"
            )
        baseline = stack.enter_context(
            contextlib.closing(connect(Path(scratch) / "raw.db", isolation_level=None))
        )
        raw.sqlite_table(baseline, "FULL")
        pending, rows = iter(bodies), iter(raw.rows(count))
        replayed = 0
        _Recording.outside = 0

        def service_writes(size: int) -> None:
            _Recording.transactions = transactions
            try:
                for principal, body in (next(pending) for _ in range(size)):
                    service.write(principal, body)
            finally:
                _Recording.transactions = None

        def replay(size: int) -> None:
            nonlocal replayed
            for transaction in _turn_of(transactions, replayed, size, "transaction"):
                for sql, parameters, many in transaction:
                    if many:
                        replayer.executemany(sql, parameters)
                    else:
                        replayer.execute(sql, parameters).fetchall()
            replayed = len(transactions)

        def raw_commits(size: int) -> None:
            for row in (next(rows) for _ in range(size)):
                raw.sqlite_commit(baseline, row)

        figures = _turns(
            count, chunk, {"service": service_writes, "replay": replay}, {"raw_full": raw_commits}
        )
        _committed(transactions, count)
        durability = _pragmas(replayer)
        service.store.close()
        replayer.close()
        differing = _sqlite_differences(folder / DATABASE_FILE, copy)
    return _result(
        "sqlite",
        transactions,
        differing,
        figures,
        ("raw_full",),
        statements_outside_a_write=round(_Recording.outside / count, 2),
        pragmas=durability,
    )


# -- PostgreSQL -------------------------------------------------------------------------


def _pg_tables(conn: Any, schema: str) -> list[str]:
    return [
        name
        for (name,) in conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = %s AND table_type = 'BASE TABLE' ORDER BY table_name",
            (schema,),
        )
    ]


def _pg_copy(conn: Any, source: str, target: str) -> None:
    """Every row of ``source``'s tables into ``target``'s (made by the same migrations),
    and each sequence set where ``source``'s is."""
    for table in _pg_tables(conn, source):
        # the migrations' own rows (their versions, the store's metadata) come again
        if conn.execute(f"SELECT EXISTS (SELECT FROM {target}.{table})").fetchone()[0]:
            conn.execute(f"DELETE FROM {target}.{table}")
        conn.execute(
            f"INSERT INTO {target}.{table} OVERRIDING SYSTEM VALUE SELECT * FROM {source}.{table}"
        )
        for schema in (source, target):  # both planned from fresh statistics alike
            conn.execute(f"ANALYZE {schema}.{table}")
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
    """The tables whose rows differ between the two schemas."""
    differing = []
    for table in _pg_tables(conn, source):
        one = f"SELECT * FROM {source}.{table} EXCEPT ALL SELECT * FROM {target}.{table}"
        other = f"SELECT * FROM {target}.{table} EXCEPT ALL SELECT * FROM {source}.{table}"
        if conn.execute(f"SELECT EXISTS ({one}) OR EXISTS ({other})").fetchone()[0]:
            differing.append(table)
    return differing


def _same_durability(pooled: Any, replayer: Any) -> str:
    """The store's ``synchronous_commit``, which the replay's connection must share."""
    durability: str = pooled.execute("SHOW synchronous_commit").fetchone()[0]
    if replayer.execute("SHOW synchronous_commit").fetchone()[0] != durability:
        raise RuntimeError("the replay's synchronous_commit is not the store's")
    return durability


def postgres_floor(count: int, chunk: int, dsn: str) -> dict[str, Any]:
    """The PostgreSQL floor: the service, its replay, the raw insert and LangGraph's puts
    in turns."""
    import psycopg

    from bench import peer
    from bench.postgres import drop_schema, open_store
    from governed_memory.crypto import Keyring
    from governed_memory.service import MemoryService
    from governed_memory.store.postgres import exchange

    items, bodies = _bodies(count)
    tag = uuid.uuid4().hex[:8]
    schemas = {name: f"bench_floor_{name}_{tag}" for name in ("store", "copy", "raw")}
    messages: list[list[Any]] = []
    recording = False
    run = exchange.run

    def record(conn: Any, statements: Sequence[Any]) -> Any:
        if recording:
            messages.append(list(statements))
        return run(conn, statements)

    with contextlib.ExitStack() as stack:
        for schema in schemas.values():
            stack.callback(drop_schema, dsn, schema)
        admin = stack.enter_context(psycopg.connect(dsn, autocommit=True))
        store = open_store(dsn, schemas["store"])
        stack.callback(store.close)
        open_store(dsn, schemas["copy"]).close()  # the same migrations, no rows
        service = MemoryService(store, Keyring(secrets.token_bytes(32)))
        exchange.run = record  # type: ignore[assignment]
        stack.callback(setattr, exchange, "run", run)
        first_writes(service, items)
        _pg_copy(admin, schemas["store"], schemas["copy"])
        # as the pool's connections: autocommit, the schema, the server's settings
        replayer = stack.enter_context(psycopg.connect(dsn, autocommit=True))
        replayer.execute(f"SET search_path TO {schemas['copy']}")
        with store.database.connection() as pooled:
            durability = _same_durability(pooled, replayer)
        baseline = stack.enter_context(psycopg.connect(dsn, autocommit=True))
        baseline.execute("SET synchronous_commit = on")  # as bench.raw's, the bar's baseline
        insert = raw.postgres_table(baseline, schemas["raw"])
        langgraph = stack.enter_context(peer.postgres_store(dsn))
        pending, rows = iter(bodies), iter(raw.rows(count))
        puts = iter([(peer.namespace(i), i.memory_id, peer.value(i)) for i in items])
        replayed = 0

        def service_writes(size: int) -> None:
            nonlocal recording
            recording = True
            try:
                for principal, body in (next(pending) for _ in range(size)):
                    service.write(principal, body)
            finally:
                recording = False

        def replay(size: int) -> None:
            nonlocal replayed
            for statements in _turn_of(messages, replayed, size, "message"):
                run(replayer, statements)
            replayed = len(messages)

        def raw_inserts(size: int) -> None:
            with baseline.cursor() as cursor:
                for row in (next(rows) for _ in range(size)):
                    cursor.execute(insert, row)

        def langgraph_puts(size: int) -> None:
            for namespace, key, value in (next(puts) for _ in range(size)):
                langgraph.put(namespace, key, value)

        figures = _turns(
            count,
            chunk,
            {"service": service_writes, "replay": replay},
            {"raw_insert": raw_inserts, "langgraph": langgraph_puts},
        )
        differing = _pg_differences(admin, schemas["store"], schemas["copy"])
    return _result(
        "postgres",
        messages,
        differing,
        figures,
        ("langgraph", "raw_insert"),
        synchronous_commit=durability,
    )


def main(argv: list[str] | None = None) -> int:
    from bench import peer

    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--writes", type=int, default=3_000, help="writes by each side")
    parser.add_argument("--chunk", type=int, default=CHUNK, help="writes a turn")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    args = parser.parse_args(argv)
    for option in ("writes", "chunk"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be at least 1")
    dsn = raw.postgres_dsn()
    if args.backend in ("postgres", "both"):
        missing = raw.postgres_reachable(dsn) or peer.missing()
        if missing is not None:
            parser.error(
                f"the PostgreSQL floor cannot run: {missing} (--backend sqlite runs SQLite's)"
            )
    if args.backend in ("sqlite", "both"):
        print(json.dumps(sqlite_floor(args.writes, args.chunk)), flush=True)
    if args.backend in ("postgres", "both"):
        print(json.dumps(postgres_floor(args.writes, args.chunk, dsn)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
