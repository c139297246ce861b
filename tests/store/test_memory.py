"""What the in-memory reference store promises beyond the contract."""

from __future__ import annotations

import pytest

from governed_memory.errors import ReadWouldWait
from governed_memory.store.memory import MemoryStore
from tests.support.threads import held_elsewhere


def test_the_memory_store_refuses_a_read_that_must_not_wait_while_a_writer_holds_it() -> None:
    """The in-memory store's lock is held by writers; a no-wait read does not queue."""
    store = MemoryStore()
    with held_elsewhere(store._lock), pytest.raises(ReadWouldWait):
        store.api_key("k1", wait=False)
    assert store.api_key("k1", wait=False) is None
