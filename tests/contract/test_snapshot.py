"""Exports read one snapshot: a forget during an export cannot leak into it."""

from __future__ import annotations

from governed_memory.service import MemoryService
from tests.support.fakes import body, principal, query

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


def test_a_rebuild_leaves_out_a_tenant_whose_log_moved_and_swaps_in_the_others(
    service: MemoryService,
) -> None:
    """A write that lands after the rebuild read a tenant's log makes the store leave that
    tenant as it is (and name it), while the other tenants of the same swap are replaced."""
    from governed_memory.core.projection import replay
    from governed_memory.records import ItemChange, TenantRebuild

    other = principal("globex")
    service.write(WRITER, body(id="m1"))
    service.write(other, body(id="g1"))

    def unindexed_fold(tenant: str) -> TenantRebuild:
        events = list(service.store.tenant_events(tenant))
        items = replay(e.event for e in events).values()
        return TenantRebuild(
            tenant, [ItemChange(item, 0, None) for item in items], events[-1].position
        )

    stale, fresh = unindexed_fold("acme"), unindexed_fold("globex")
    service.write(WRITER, body(id="m2"))  # acknowledged after the fold
    assert service.store.rebuild([stale, fresh]) == {"acme"}
    assert service.store.get("acme", "m2") is not None
    assert sorted(hit.item.id for hit in service.search(WRITER, query()).items) == ["m1", "m2"]
    assert service.search(other, query()).items == []  # swapped in: no postings passed
    assert service.maintenance.rebuild() == 3
    assert service.verify_replay().ok
    assert service.get(WRITER, "m2").content == "The customer prefers email over phone calls."
    assert [hit.item.id for hit in service.search(other, query()).items] == ["g1"]
