"""Group commit (store/group_commit.py): batches queued while a commit is under way are
committed together by the next one, their callers woken by the caller that committed
them; each caller is woken once, whatever became of the group."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from governed_memory.core.events import StoredEvent
from governed_memory.errors import StoreUnavailable
from governed_memory.records import Batch
from governed_memory.store.group_commit import GroupCommit, Pending


class CountingLock:
    """A write lock that counts how often it is taken."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.taken = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        acquired = self._lock.acquire(blocking, timeout)
        self.taken += acquired
        return acquired

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def batch(number: int) -> Batch:
    return Batch(f"tenant-{number}", [], [])


def queued(group: GroupCommit, count: int) -> None:
    """Wait until ``count`` batches wait in ``group``'s queue."""
    deadline = time.monotonic() + 10
    while len(group._queue) < count:
        assert time.monotonic() < deadline, "the batches were never queued"
        time.sleep(0.001)


def committing(
    groups: list[list[Batch]], fail: Callable[[list[Pending]], BaseException | None]
) -> Callable[[list[Pending]], None]:
    """A backend's ``commit_group``: records each group's batches, then marks each batch
    committed (an empty result), or raises what ``fail`` returns for the group."""

    def commit_group(group: list[Pending]) -> None:
        groups.append([pending.batch for pending in group])
        failure = fail(group)
        if failure is not None:
            raise failure
        for pending in group:
            pending.result, pending.done = [], True

    return commit_group


def slow_first_commit(
    groups: list[list[Batch]], release: threading.Event, pool: ThreadPoolExecutor
) -> tuple[GroupCommit, Future[list[StoredEvent]]]:
    """A group commit whose first commit (of ``batch(1)``, started in ``pool``) lasts until
    ``release`` is set, and that commit's future, once it is under way."""

    def slow(group: list[Pending]) -> None:
        if len(groups) == 1:
            release.wait(10)

    group = GroupCommit(committing(groups, slow))
    first = pool.submit(group.commit, batch(1))
    deadline = time.monotonic() + 10
    while not groups:
        assert time.monotonic() < deadline, "the first commit never started"
        time.sleep(0.001)
    return group, first


def commit_all(group: GroupCommit, batches: list[Batch]) -> list[Future[list[StoredEvent]]]:
    """Start a caller for each batch, one after another; their futures."""
    pool = ThreadPoolExecutor(max_workers=len(batches))
    futures = []
    for number, each in enumerate(batches):
        futures.append(pool.submit(group.commit, each))
        queued(group, number + 1)
    pool.shutdown(wait=False)
    return futures


def test_batches_queued_during_a_commit_go_in_the_next_group_under_one_taking_of_the_lock() -> None:
    groups: list[list[Batch]] = []
    lock = CountingLock()
    group = GroupCommit(committing(groups, lambda _: None), lock=lock)  # type: ignore[arg-type]
    batches = [batch(number) for number in range(4)]
    lock.acquire()  # a transaction outside group commit holds the write lock meanwhile
    futures = commit_all(group, batches)
    lock.release()
    assert [future.result(timeout=10) for future in futures] == [[], [], [], []]
    assert groups == [batches]
    # The other transaction's and the group's: a caller whose batch another committed is
    # woken, it does not take the lock to find its batch done.
    assert lock.taken == 2


class RefusingLock(CountingLock):
    """A write lock another process keeps past the busy timeout, once ``refuse`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = threading.Event()

    def __enter__(self) -> bool:
        self.acquire()
        if self.refuse.is_set():
            self.release()
            raise StoreUnavailable("SQLite write failed: locked by another process")
        return True


def test_a_write_lock_that_cannot_be_had_fails_every_queued_batch_at_once() -> None:
    """Each caller does not lead in turn and wait a busy timeout of its own."""
    groups: list[list[Batch]] = []
    lock = RefusingLock()
    group = GroupCommit(committing(groups, lambda _: None), lock=lock)
    lock.acquire()  # another transaction holds the lock while the batches queue
    lock.refuse.set()
    futures = commit_all(group, [batch(number) for number in range(4)])
    lock.release()
    for future in futures:
        with pytest.raises(StoreUnavailable, match="locked by another process"):
            future.result(timeout=10)
    assert lock.taken == 2  # the other transaction's, and one try for the four
    assert groups == []
    lock.refuse.clear()
    assert group.commit(batch(9)) == []  # and the next write leads afresh


def test_a_group_that_fails_fails_each_of_its_callers_and_the_next_caller_leads() -> None:
    groups: list[list[Batch]] = []
    lock = CountingLock()
    broken = StoreUnavailable("the disk is gone")

    def fail(group: list[Pending]) -> BaseException | None:
        return broken if len(groups) == 1 else None

    group = GroupCommit(committing(groups, fail), lock=lock)  # type: ignore[arg-type]
    lock.acquire()
    failing = commit_all(group, [batch(1), batch(2)])
    lock.release()
    for future in failing:
        with pytest.raises(StoreUnavailable):
            future.result(timeout=10)
    assert group.commit(batch(3)) == []
    assert groups == [[batch(1), batch(2)], [batch(3)]]


def test_a_batch_the_backend_left_unmarked_is_not_acknowledged() -> None:
    def forgetful(group: list[Pending]) -> None:
        group[0].result, group[0].done = [], True  # the second is left as it was

    group = GroupCommit(forgetful)
    lock = group.lock
    lock.acquire()
    first, second = commit_all(group, [batch(1), batch(2)])
    lock.release()
    assert first.result(timeout=10) == []
    with pytest.raises(StoreUnavailable, match="did not finish"):
        second.result(timeout=10)


def test_callers_queued_behind_a_running_commit_are_committed_by_the_next_one() -> None:
    """The oldest waiting caller leads the next group, and takes every batch queued by the
    time it holds the lock."""
    groups: list[list[Batch]] = []
    release = threading.Event()
    pool = ThreadPoolExecutor(max_workers=4)
    group, first = slow_first_commit(groups, release, pool)  # the others queue behind it
    rest: list[Future[Any]] = []
    for number in (2, 3, 4):
        rest.append(pool.submit(group.commit, batch(number)))
        queued(group, number - 1)
    release.set()
    assert [f.result(timeout=10) for f in (first, *rest)] == [[], [], [], []]
    pool.shutdown()
    assert groups == [[batch(1)], [batch(2), batch(3), batch(4)]]


class Interrupted(BaseException):
    """What a signal handler raises in a writing main thread (a Ctrl-C)."""


def test_a_writer_interrupted_while_it_waits_leaves_the_queue_and_later_writers_go_on() -> None:
    groups: list[list[Batch]] = []
    release = threading.Event()
    pool = ThreadPoolExecutor(max_workers=2)
    group, first = slow_first_commit(groups, release, pool)
    main = threading.get_ident()

    def interrupt() -> None:
        queued(group, 1)  # this thread's batch waits behind the first commit
        signal.pthread_kill(main, signal.SIGUSR1)

    def handler(*_: object) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        threading.Thread(target=interrupt).start()
        with pytest.raises(Interrupted):
            group.commit(batch(2))
    finally:
        signal.signal(signal.SIGUSR1, previous)
    release.set()
    assert first.result(timeout=10) == []
    assert pool.submit(group.commit, batch(3)).result(timeout=10) == []
    pool.shutdown()
    assert groups == [[batch(1)], [batch(3)]]
