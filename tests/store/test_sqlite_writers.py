"""Several processes writing one SQLite file: they take turns on a lock beside it, a
waiting writer goes on the moment the lock is free, and nothing acknowledged is lost."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import governed_memory
from governed_memory.bootstrap import open_service
from governed_memory.service import MemoryService
from governed_memory.store.group_commit import Pending
from governed_memory.store.sqlite import SQLiteStore
from tests.support.fakes import body, principal

WRITER = principal()
ROOTS = os.pathsep.join(
    [str(Path(governed_memory.__file__).parents[1]), str(Path(__file__).parents[2])]
)

#: A process writing ``count`` items (ids ``prefix0`` …) through the service, each one
#: acknowledged before the next.
WRITER_SCRIPT = textwrap.dedent(
    """
    import sys
    from governed_memory.bootstrap import open_service
    from tests.support.fakes import body, principal

    data_dir, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    service = open_service(data_dir=data_dir)
    print("ready", flush=True)
    sys.stdin.readline()
    for number in range(count):
        service.write(principal(), body(id=f"{prefix}{number}"))
    service.store.close()
    print("done", flush=True)
    """
)

#: A process that takes the writers' lock of a database and keeps it until killed.
HOLDER_SCRIPT = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(600)
    """
)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "gmem-data"


@pytest.fixture
def service(data_dir: Path) -> Iterator[MemoryService]:
    opened = open_service(data_dir=data_dir)
    yield opened
    opened.store.close()


def _store(service: MemoryService) -> SQLiteStore:
    store = service.store
    assert isinstance(store, SQLiteStore)
    return store


def _turn_file(service: MemoryService) -> Path:
    """The writers' lock: ``gmem.sqlite3-lock`` beside ``gmem.sqlite3``."""
    path = _store(service).database.path
    return path.with_name(path.name + "-lock")


def _python(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOTS},
    )


def test_a_write_waits_for_another_process_turn_and_goes_on_the_moment_it_ends(
    service: MemoryService,
) -> None:
    """A writer holding the lock beside the database keeps every other writer out; when it
    lets go, the waiting write commits at once (no busy handler's sleep)."""
    service.write(WRITER, body(id="first"))
    other = os.open(_turn_file(service), os.O_RDWR | os.O_CREAT)  # another holder
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        done = threading.Event()

        def write() -> None:
            service.write(WRITER, body(id="waiting"))
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        assert not done.wait(0.5), "the write did not wait for the other writer's turn"
        released = time.monotonic()
        fcntl.flock(other, fcntl.LOCK_UN)
        assert done.wait(10)
        assert time.monotonic() - released < 0.5
        writer.join()
    finally:
        os.close(other)
    assert service.get(WRITER, "waiting").content


def test_writes_queued_while_another_process_writes_commit_in_one_group(
    service: MemoryService,
) -> None:
    """The leader of a group waits for the other process's turn before it takes the
    queue: the writes that arrive meanwhile share its transaction."""
    store = _store(service)
    service.write(WRITER, body(id="first"))
    groups: list[int] = []
    commit_group = store._group._commit_group

    def counted(group: list[Pending]) -> None:
        groups.append(len(group))
        commit_group(group)

    store._group._commit_group = counted
    other = os.open(_turn_file(service), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        writers = [
            threading.Thread(target=service.write, args=(WRITER, body(id=f"w{n}")))
            for n in range(4)
        ]
        for writer in writers:
            writer.start()
            time.sleep(0.1)  # the first leads; the others queue behind it
        fcntl.flock(other, fcntl.LOCK_UN)
        for writer in writers:
            writer.join(10)
    finally:
        os.close(other)
    assert groups == [4]
    for number in range(4):
        assert service.get(WRITER, f"w{number}").content


def test_a_killed_holder_of_the_turn_does_not_block_the_others(
    service: MemoryService,
) -> None:
    """The kernel releases a dead process's lock: the write waiting on it goes on."""
    holder = _python(HOLDER_SCRIPT, str(_turn_file(service)))
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        done = threading.Event()

        def write() -> None:
            service.write(WRITER, body(id="after-the-holder"))
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        assert not done.wait(0.3)
        holder.kill()
        assert done.wait(10)
        writer.join()
    finally:
        holder.kill()
        holder.communicate()
    assert service.get(WRITER, "after-the-holder").content


def test_processes_writing_at_once_are_all_acknowledged_and_nothing_is_lost(
    service: MemoryService, data_dir: Path
) -> None:
    """Two other processes and this one write concurrently: every acknowledged write is
    there, once, and the log replays into the same state."""
    count = 40
    others = [_python(WRITER_SCRIPT, str(data_dir), prefix, str(count)) for prefix in "pq"]
    try:
        for process in others:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "ready"
        for process in others:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        for number in range(count):
            service.write(WRITER, body(id=f"r{number}"))
        for process in others:
            out, _ = process.communicate(timeout=120)
            assert process.returncode == 0
            assert out.strip() == "done"
    finally:
        for process in others:
            process.kill()
            process.communicate()
    for prefix in "pqr":
        for number in range(count):
            assert service.get(WRITER, f"{prefix}{number}").content
    conn = sqlite3.connect(_store(service).database.path)
    try:
        (events,) = conn.execute("SELECT count(*) FROM events").fetchone()
    finally:
        conn.close()
    assert events == 3 * count
    assert service.verify_replay().ok


def test_a_read_only_store_takes_no_turn(service: MemoryService, data_dir: Path) -> None:
    """Commands that only read create no lock file."""
    service.write(WRITER, body(id="m1"))
    lock = _turn_file(service)
    service.store.close()
    lock.unlink(missing_ok=True)
    reader = SQLiteStore.in_directory(data_dir, read_only=True)
    try:
        assert not lock.exists()
    finally:
        reader.close()
