"""Run work on many threads released at the same moment (for race tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable
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
