"""Exports read one snapshot: a forget during an export cannot leak into it."""

from __future__ import annotations

from governed_memory.service import MemoryService
from tests.support.fakes import body, principal

WRITER = principal()


def test_a_snapshot_does_not_see_a_concurrent_forget(service: MemoryService) -> None:
    """Reads inside a snapshot keep seeing the state it started with, key and events."""
    import threading

    service.write(WRITER, body(id="m1"))
    store = service.store
    seen: dict[str, object] = {}
    started, go = threading.Event(), threading.Event()

    def reader() -> None:
        with store.snapshot():
            seen["key_before"] = store.subject_key("acme", "customer-1") is not None
            started.set()
            go.wait(10)
            seen["key_after"] = store.subject_key("acme", "customer-1") is not None
            seen["head_after"] = len(store.events_after(None, 0, 100))

    thread = threading.Thread(target=reader)
    thread.start()
    started.wait(10)
    if store.__class__.__name__ == "MemoryStore":
        go.set()  # the reference store holds writers off instead: forget after the read
        thread.join(10)
        service.forget_subject(WRITER, "customer-1")
    else:
        service.forget_subject(WRITER, "customer-1")
        go.set()
        thread.join(10)
    assert seen == {"key_before": True, "key_after": True, "head_after": 1}
    assert store.subject_key("acme", "customer-1") is None


def test_a_rebuild_folded_from_an_older_log_is_refused(service: MemoryService) -> None:
    """A write that lands after the rebuild read the log makes the store refuse the swap."""
    import pytest

    from governed_memory.core.projection import replay
    from governed_memory.errors import LogMoved
    from governed_memory.records import ItemChange

    service.write(WRITER, body(id="m1"))
    events = list(service.store.tenant_events("acme"))
    stale = [ItemChange(item, 0, None) for item in replay(e.event for e in events).values()]
    service.write(WRITER, body(id="m2"))  # acknowledged after the fold
    with pytest.raises(LogMoved):
        service.store.rebuild("acme", stale, events[-1].position)
    assert service.store.get("acme", "m2") is not None
    assert service.maintenance.rebuild() == 2
    assert service.verify_replay().ok
    assert service.get(WRITER, "m2").content == "The customer prefers email over phone calls."
