"""What ``gmem serve`` does to its own process before it serves: start-up's objects are
frozen out of the garbage collector, so a full collection while serving walks only what
serving made (no stall of every request in flight for the whole heap)."""

from __future__ import annotations

import gc
import socket
import weakref
from collections.abc import Iterator

import pytest
import uvicorn
from fastapi import FastAPI

from governed_memory.http import server
from governed_memory.http.protocol import Limits


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """The test process's collector as it was: whatever a test froze is thawed."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_serving_starts_with_start_ups_objects_frozen(
    monkeypatch: pytest.MonkeyPatch, unfrozen: None
) -> None:
    seen: dict[str, int] = {}

    def run(self: uvicorn.Server, sockets: list[socket.socket] | None = None) -> None:
        seen["frozen"] = gc.get_freeze_count()
        seen["tracked"] = len(gc.get_objects())

    monkeypatch.setattr(uvicorn.Server, "run", run)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        server.serve_socket(FastAPI(), listener, Limits())

    assert seen["frozen"] > 0
    assert seen["tracked"] < seen["frozen"] / 10  # a collection walks a tenth of it, at most


def test_settling_collects_start_ups_garbage_before_freezing_it(unfrozen: None) -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it

    gone = weakref.ref(Node())  # garbage, in a cycle
    server.settle_startup()

    assert gone() is None  # collected, not frozen for the life of the process
    assert gc.get_freeze_count() > 0
