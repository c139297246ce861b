"""Processes writing one SQLite file take turns on a lock file beside it (store/sqlite/
turns.py): a waiting writer goes on as soon as the other lets go, never waits longer than
the busy timeout, and a process that dies holding the lock holds it no more."""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from governed_memory.crypto import Keyring
from governed_memory.errors import NotFound, StoreUnavailable
from governed_memory.service import MemoryService
from governed_memory.store.sqlite import SQLiteStore
from governed_memory.store.sqlite.store import DATABASE_FILE
from governed_memory.store.sqlite.turns import WriteTurns, lock_path
from tests.support.fakes import FakeClock, body, principal

WRITER = principal()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "gmem-data"


@contextmanager
def opened(data_dir: Path, busy_timeout_ms: int) -> Iterator[MemoryService]:
    store = SQLiteStore.in_directory(data_dir, busy_timeout_ms=busy_timeout_ms)
    try:
        yield MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
    finally:
        store.close()


@pytest.fixture
def service(data_dir: Path) -> Iterator[MemoryService]:
    """A service whose writes wait half a second at most for another process's turn."""
    with opened(data_dir, busy_timeout_ms=500) as made:
        yield made


@contextmanager
def held_elsewhere(database: Path) -> Iterator[None]:
    """The lock file held as another process holds it (an open file of its own: ``flock``
    locks of two open files exclude each other even within one process); it must be free
    (``BlockingIOError`` if not, rather than a test that hangs)."""
    fd = os.open(lock_path(database), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)  # closing the file lets go of its lock


def ids(service: MemoryService, *candidates: str) -> set[str]:
    """Which of ``candidates`` the store holds."""
    held = set()
    for memory_id in candidates:
        try:
            held.add(service.get(WRITER, memory_id).id)
        except NotFound:
            continue
    return held


def test_a_writable_store_makes_its_lock_file_beside_the_database(data_dir: Path) -> None:
    store = SQLiteStore.in_directory(data_dir)
    store.close()
    assert lock_path(data_dir / DATABASE_FILE).name == "gmem.sqlite3-lock"
    assert lock_path(data_dir / DATABASE_FILE).stat().st_size == 0  # it holds nothing


def test_a_read_only_store_takes_no_turns_and_makes_no_file(data_dir: Path) -> None:
    SQLiteStore.in_directory(data_dir).close()
    lock_path(data_dir / DATABASE_FILE).unlink()
    SQLiteStore.in_directory(data_dir, read_only=True).close()
    assert not lock_path(data_dir / DATABASE_FILE).exists()


def test_a_write_waits_while_another_process_writes_and_goes_on_when_it_lets_go(
    data_dir: Path,
) -> None:
    with opened(data_dir, busy_timeout_ms=30_000) as service:
        pool = ThreadPoolExecutor(1)
        with held_elsewhere(data_dir / DATABASE_FILE):
            pending: Future[object] = pool.submit(service.write, WRITER, body(id="m1"))
            with pytest.raises(TimeoutError):
                pending.result(timeout=0.2)  # waits for the turn
        pending.result(timeout=10)  # handed the turn when the other let go
        pool.shutdown()
        assert ids(service, "m1") == {"m1"}


def test_a_write_gives_up_after_the_busy_timeout_and_writes_nothing(
    service: MemoryService, data_dir: Path
) -> None:
    with (
        held_elsewhere(data_dir / DATABASE_FILE),
        pytest.raises(StoreUnavailable, match="locked by another process"),
    ):
        service.write(WRITER, body(id="m1"))
    # The turn the helper was still waiting for when the write gave up is let go: the
    # next write takes it, and so does another process.
    service.write(WRITER, body(id="m2"))
    assert ids(service, "m1", "m2") == {"m2"}
    with held_elsewhere(data_dir / DATABASE_FILE):
        pass


def test_a_process_that_dies_holding_the_lock_holds_it_no_more(
    service: MemoryService, data_dir: Path
) -> None:
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(600)\n",
            str(lock_path(data_dir / DATABASE_FILE)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            with pytest.raises(StoreUnavailable, match="locked by another process"):
                service.write(WRITER, body(id="m1"))
        finally:
            holder.kill()  # SIGKILL: it lets go of nothing itself
            holder.wait()
    service.write(WRITER, body(id="m2"))
    assert ids(service, "m1", "m2") == {"m2"}


def test_the_threads_of_one_process_take_turns_before_the_file(tmp_path: Path) -> None:
    database = tmp_path / "db.sqlite3"
    database.touch()
    turns = WriteTurns(database, timeout_s=5)
    inside = 0
    most = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        for _ in range(200):
            with turns:
                with guard:
                    inside += 1
                    most = max(most, inside)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    turns.close()
    assert most == 1


def test_a_given_up_turn_taken_later_is_let_go_and_the_next_turn_is_served(
    tmp_path: Path,
) -> None:
    database = tmp_path / "db.sqlite3"
    database.touch()
    turns = WriteTurns(database, timeout_s=0.1)
    with held_elsewhere(database):
        with pytest.raises(StoreUnavailable):
            turns.acquire()
        with pytest.raises(StoreUnavailable):
            turns.acquire()  # asked again while the helper still waits: one helper
    turns.acquire()
    turns.release()
    turns.close()
    with held_elsewhere(database):  # nothing of this process holds the file any more
        pass


def test_a_turn_given_up_never_lets_go_of_a_later_turn(tmp_path: Path) -> None:
    """The helper may be handed the lock of a turn given up just as the next turn is
    asked for: that lock is then the next turn's, and nothing lets it go meanwhile."""
    database = tmp_path / "db.sqlite3"
    database.touch()
    turns = WriteTurns(database, timeout_s=0.05)
    for _ in range(20):
        with held_elsewhere(database), pytest.raises(StoreUnavailable):
            turns.acquire()
        turns.acquire()  # at once: the helper is being handed the lock given up
        settled(turns)  # the helper would have let it go by now
        with pytest.raises(BlockingIOError), held_elsewhere(database):
            pass  # still this process's turn
        turns.release()
    turns.close()


def test_a_store_with_a_purge_due_closes_while_another_process_holds_the_turn(
    data_dir: Path,
) -> None:
    store = SQLiteStore.in_directory(data_dir, busy_timeout_ms=100)
    store.database.checkpoint_due = True  # as after a forget whose purge a reader held up
    with held_elsewhere(data_dir / DATABASE_FILE):
        store.close()  # the purge needs the turn; the close does not wait for ever for it
    with pytest.raises(sqlite3.ProgrammingError):
        store.database.writer.execute("SELECT 1")  # closed all the same


def settled(turns: WriteTurns) -> None:
    """Wait until the helper has been handed the lock it asked for and dealt with it."""
    deadline = time.monotonic() + 5
    while turns._waiter is not None and turns._waiter.waiting():
        assert time.monotonic() < deadline, "the helper was never handed the lock"
        time.sleep(0.01)


def test_a_wait_interrupted_by_a_signal_leaves_the_turn_to_others(tmp_path: Path) -> None:
    """Ctrl-C (or a handler raising) while waiting: neither this process's turn nor the
    lock the helper is handed later stays held."""
    database = tmp_path / "db.sqlite3"
    database.touch()
    turns = WriteTurns(database, timeout_s=10)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with held_elsewhere(database):
            signal.setitimer(signal.ITIMER_REAL, 0.1)
            with pytest.raises(KeyboardInterrupt):
                turns.acquire()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    settled(turns)
    with held_elsewhere(database):  # BlockingIOError if the helper had kept it
        pass
    turns.acquire()  # this process's threads' turn was let go too
    turns.release()
    turns.close()


def test_the_lock_file_takes_the_database_files_mode(tmp_path: Path) -> None:
    """As SQLite's own side files do: a store its group shares stays theirs to open."""
    database = tmp_path / "db.sqlite3"
    database.touch()
    database.chmod(0o640)
    WriteTurns(database, timeout_s=1).close()
    assert stat.S_IMODE(lock_path(database).stat().st_mode) == 0o640


def test_where_the_file_system_cannot_flock_sqlites_own_lock_serves_alone(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)  # the module turns.py calls
    with opened(data_dir, busy_timeout_ms=500) as service:
        service.write(WRITER, body(id="m1"))
        assert ids(service, "m1") == {"m1"}
    assert "cannot lock gmem.sqlite3-lock" in caplog.text
