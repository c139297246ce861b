"""Checking tenants against their logs in worker processes, ahead of a rebuild.

A rebuild over an intact projection writes nothing (:mod:`governed_memory.store.
rebuild_diff`), but finding that out is Python: reading and decoding each tenant's log,
folding it, reading its rows and comparing them, one core's worth. Here worker processes
(:func:`.checker.main`, one a core) check shares of the tenants at once, each on a
read-only connection of its own. A tenant is *intact* when, in one snapshot,
the fold of its log, with the index entries its documents hold, makes exactly the rows it
holds: every active item's entry is kept (same content version and hash, so nothing would
be opened), its scopes exist, and the comparison a swap makes finds nothing to write.
Anything else (a tenant too large to compare, an item to index, a row that differs) is
left to the rebuild.

Right after the checks, the rebuild takes the intact tenants as done under the write lock
(:meth:`_Check.accept`), but only if nothing at all was committed since the checks began:
no other connection (``PRAGMA data_version`` of this process's writer, which its own
commits do not move) and not this process's writer either (its ``total_changes``, which
counts every row it inserted, updated or deleted). Then it folds and swaps every other
tenant as usual. A check that fails (a worker cannot start, does not answer in time, a
read fails) is logged and leaves every tenant to the rebuild.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_memory.records import Intact, IntactCheck, NothingIntact
from governed_memory.store.sqlite import sql

if TYPE_CHECKING:
    from governed_memory.store.sqlite.batch import ScopeKey
    from governed_memory.store.sqlite.database import SQLiteDatabase

log = logging.getLogger("governed_memory.store")

#: A log of fewer events is checked by the rebuild itself: starting the workers (about
#: 0.15 s each, mostly imports) would cost more than they save.
PARALLEL_EVENTS = 20_000
#: The most worker processes, whatever the machine has.
MOST_PROCESSES = 8
#: How long a worker may take to end once its input is closed.
WORKER_EXIT_SECONDS = 10
#: How often the rebuild looks at every worker for a failure or a silence.
WATCH_SECONDS = 0.1
#: How long a worker may take to answer for one share (its reads wait at most
#: ``checker.BUSY_TIMEOUT_MS`` for a lock; a share of a 100k-item store takes well under a
#: second): past it, every worker is stopped and the rebuild does the work itself.
ANSWER_SECONDS = 120.0
#: Shares a worker gets on average: small enough that one slow share does not keep the
#: others waiting.
SHARES_PER_PROCESS = 4


#: Where Linux's cgroup v2 states this process's CPU quota ("max 100000", "200000 100000").
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def processes() -> int:
    """How many worker processes to check with: the cores this process may run on, or
    fewer if its container's CPU quota allows fewer."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = _cpu_quota()
    if quota is not None:
        cores = min(cores, quota)
    return min(cores, MOST_PROCESSES)


def _cpu_quota() -> int | None:
    """The cores' worth of CPU time the cgroup grants (rounded up), if it sets a quota."""
    try:
        quota, period = CPU_MAX.read_text().split()[:2]
        return max(1, -(-int(quota) // int(period)))
    except (OSError, ValueError):  # no cgroup v2, or "max": no quota
        return None


def check(
    database: SQLiteDatabase,
    tenants: Sequence[str],
    events: int,
    scopes_kept: Callable[[dict[ScopeKey, int]], None],
) -> IntactCheck:
    """Check ``tenants`` (of a log of ``events`` events) in worker processes; those found
    intact, for the rebuild to :meth:`~_Check.accept`, which hands ``scopes_kept`` the
    scope ids of those it accepts (a swap would have). Nothing is checked for a small log,
    an empty projection or on a single core, nor without an interpreter to start (this
    process embedded in another program, or frozen)."""
    count = min(processes(), len(tenants))
    if (
        events < PARALLEL_EVENTS
        or count < 2
        or not sys.executable
        or getattr(sys, "frozen", False)
        or not database.query(sql.ANY_ITEM)  # gmem import's empty projection: all to load
    ):
        return NothingIntact()
    if importlib.util.find_spec(READER_MODULE) is None:  # found, not imported: see WORKER_MODULE
        log.warning(
            "rebuild: %s is not installed, so no worker process can check tenants; "
            "every tenant is rebuilt in this process",
            READER_MODULE,
        )
        return NothingIntact()
    shares: queue.SimpleQueue[list[str]] = queue.SimpleQueue()
    for share in _shares(tenants, count * SHARES_PER_PROCESS):
        shares.put(share)
    try:
        with database.write_lock:  # the writer is shared with group commit
            begun = _committed(database.writer)
        found = _run(database.path.resolve(), count, shares)
        intact = {row[0]: Intact(*row[1:]) for row in found}
    except Exception as error:  # noqa: BLE001 - whatever it is, the rebuild does the work
        log.warning(
            "rebuild: checking tenants in worker processes failed (%s); "
            "every tenant is rebuilt in this process",
            type(error).__name__,
        )
        return NothingIntact()
    return _Check(database, begun, intact, scopes_kept)


def _run(path: Path, count: int, shares: queue.SimpleQueue[list[str]]) -> list[list[Any]]:
    """Start ``count`` workers on the database at ``path``, hand them ``shares`` until
    none is left; what they found. Any failure, or a worker silent for longer than
    ``ANSWER_SECONDS``, stops them all at once and raises."""
    found: list[list[Any]] = []
    with contextlib.ExitStack() as stack:
        workers = [stack.enter_context(_Worker(path)) for _ in range(count)]
        threads = [
            threading.Thread(target=worker.work, args=(shares, found), daemon=True)
            for worker in workers
        ]
        for thread in threads:
            thread.start()
        pairs = list(zip(threads, workers, strict=True))
        while True:  # every worker watched at once: the first failure stops them all
            for _, worker in pairs:
                worker.raise_failure()
            busy = [(thread, worker) for thread, worker in pairs if thread.is_alive()]
            if not busy:
                return found
            if any(worker.silent_for() > ANSWER_SECONDS for _, worker in busy):
                raise TimeoutError("a worker process did not answer in time")
            busy[0][0].join(timeout=min(WATCH_SECONDS, ANSWER_SECONDS))


def module_path() -> str:
    """This process's ``sys.path`` as a ``PYTHONPATH``: each entry absolute (resolved
    against this process's working directory, as it reads them), none that would split."""
    entries = (os.path.abspath(entry) for entry in sys.path if entry)
    return os.pathsep.join(entry for entry in entries if os.pathsep not in entry)


#: The module a worker runs (:func:`.checker.main`), named rather than imported: the
#: rebuild's process never loads the copy of SQLite the worker reads with.
WORKER_MODULE = "governed_memory.store.sqlite.checker"
#: The binding the worker reads with (a dependency): without it no worker could start.
READER_MODULE = "apsw"
#: What a worker runs: that module imported once. (``python -m`` would import it, then run
#: it again as ``__main__``.)
_WORKER_MAIN = f"import sys; from {WORKER_MODULE} import main; main(sys.argv[1:])"


def worker_command(path: Path) -> list[str]:
    """The command line of a worker on the database at ``path``. ``-P``: not the working
    directory first on its path, which ``-c`` would put there; the worker is given this
    process's own path instead (:func:`module_path`), each entry made absolute as this
    process reads it: the modules it imported, never one that lies where it runs."""
    return [sys.executable, "-P", "-c", _WORKER_MAIN, str(path)]


def _committed(writer: sqlite3.Connection) -> tuple[int, int, int]:
    """What moves when anything is committed to the database: ``PRAGMA data_version``
    (another connection's commit) and the writer's ``total_changes`` (its own), with the
    writer's identity (a new connection counts from zero). Read holding the write lock.

    ``total_changes`` counts rows inserted, updated or deleted; it does not count DDL nor
    incremental blob I/O. The writer changes the projection only by the former (DDL runs
    in migrations, which also insert their ``schema_migrations`` row, and nothing here
    writes through ``blobopen``): a write path that does otherwise must move a counter
    this reads."""
    (version,) = writer.execute("PRAGMA data_version").fetchone()
    return int(version), writer.total_changes, id(writer)


class _Worker:
    """One worker process (:func:`worker_command`): given a share of tenants a line
    (JSON), it answers a line, the intact ones. Started as a new interpreter, not forked
    and not ``multiprocessing``'s spawn, which would run the caller's main script again
    in it."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._failure: BaseException | None = None
        self._heard = time.monotonic()

    def __enter__(self) -> _Worker:
        self._process = subprocess.Popen(  # noqa: S603 - this interpreter, this module
            worker_command(self._path),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ, PYTHONPATH=module_path()),
            text=True,
        )
        return self

    def __exit__(self, failed: type[BaseException] | None, *exc: object) -> None:
        process = self._process
        if failed is not None:  # a failure, a time-out or an interrupt: stop it now
            process.kill()
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()  # the worker ends at the end of its input
        try:
            process.wait(timeout=WORKER_EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if failed is not None and process.returncode not in (0, -9):
            log.warning("rebuild: a checking worker process ended with %s", process.returncode)
        assert process.stdout is not None
        process.stdout.close()

    def silent_for(self) -> float:
        """Seconds since this worker last answered (or started)."""
        return time.monotonic() - self._heard

    def work(self, shares: queue.SimpleQueue[list[str]], found: list[list[Any]]) -> None:
        """Hand this worker shares until none is left (in a thread of the rebuild)."""
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        try:
            while True:
                try:
                    share = shares.get_nowait()
                except queue.Empty:
                    return
                self._heard = time.monotonic()
                stdin.write(json.dumps(share) + "\n")
                stdin.flush()
                answer = stdout.readline()
                if not answer:
                    code = self._process.poll()
                    raise RuntimeError(f"a worker process ended ({code}) before answering")
                found.extend(json.loads(answer))  # list.extend: atomic under the GIL
                self._heard = time.monotonic()
        except BaseException as error:  # noqa: BLE001 - raised in the rebuild's thread
            self._failure = error

    def raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure


class _Check:
    """Tenants found intact, and what tells at the end whether they still are."""

    def __init__(
        self,
        database: SQLiteDatabase,
        begun: tuple[int, int, int],
        tenants: Mapping[str, Intact],
        scopes_kept: Callable[[dict[ScopeKey, int]], None],
    ) -> None:
        self._db = database
        self._begun = begun
        self._scopes_kept = scopes_kept
        self.tenants = tenants

    def accept(self) -> set[str]:
        """The tenants found intact, if no write can have changed them since they were
        checked: none if anything was committed meanwhile, by any connection (read under
        the write lock, so nothing can be now), and each one's log still ends where it
        was checked. Their scope ids go to ``scopes_kept``."""
        if not self.tenants:
            return set()
        with self._db.write_transaction() as conn:
            if _committed(conn) != self._begun:
                return set()
            accepted = {
                tenant
                for tenant, intact in self.tenants.items()
                if conn.execute(sql.TENANT_HEAD, (tenant,)).fetchone()[0] == intact.through
            }
            scopes = {
                (tenant, agent, purpose): scope
                for tenant in accepted
                for scope, agent, purpose, *_ in conn.execute(sql.REBUILD_SCOPES, (tenant,))
            }
        self._scopes_kept(scopes)  # only once read in the transaction that accepted them
        return accepted


def _shares(tenants: Sequence[str], count: int) -> list[list[str]]:
    """``tenants`` in ``count`` runs of about equal length, in order."""
    size = -(-len(tenants) // count)
    return [list(tenants[start : start + size]) for start in range(0, len(tenants), size)]


__all__ = [
    "PARALLEL_EVENTS",
    "READER_MODULE",
    "WORKER_MODULE",
    "check",
    "processes",
    "worker_command",
]
