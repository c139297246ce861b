"""Threads for concurrency tests: work released at the same moment, a lock held elsewhere."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any


def race(count: int, work: Callable[[int], Any], timeout: float = 120) -> list[Any]:
    """Run ``work(i)`` on ``count`` threads released at once; results or exceptions."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except Exception as error:  # noqa: BLE001 - collected for the assertions
            results[i] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    return results


class HeldLock:
    """What :func:`held_elsewhere` yields: ``release()`` lets the holder go early."""

    def __init__(self) -> None:
        self.taken = threading.Event()
        self._release = threading.Event()

    def release(self) -> None:
        self._release.set()


@contextmanager
def held_elsewhere(lock: AbstractContextManager[Any], timeout: float = 10) -> Iterator[HeldLock]:
    """Hold ``lock`` from another thread (as a writer would) until the block ends or
    ``release()`` is called."""
    state = HeldLock()

    def hold() -> None:
        with lock:
            state.taken.set()
            state._release.wait(timeout)

    thread = threading.Thread(target=hold)
    thread.start()
    state.taken.wait(timeout)
    try:
        yield state
    finally:
        state.release()
        thread.join()
