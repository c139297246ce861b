"""Rebuilding the index from the log while writes go on (``gmem replay``, ``gmem reindex``)."""

from __future__ import annotations

import gc
import secrets
from collections.abc import Callable, Iterator, Sequence

import pytest

from governed_memory.core.events import StoredEvent
from governed_memory.crypto import Keyring
from governed_memory.errors import StoreUnavailable
from governed_memory.records import TenantRebuild
from governed_memory.service import MemoryService, reindex
from governed_memory.service.indexing import SearchSettings
from governed_memory.store.memory import MemoryStore
from tests.support.embedder import FakeEmbedder
from tests.support.fakes import FakeClock, body, principal, query

WRITER = principal()


class WriteDuringFold(MemoryStore):
    """A store that runs one action right after a rebuild has read a tenant's log."""

    def __init__(self) -> None:
        super().__init__()
        self.after_read: Callable[[], object] | None = None

    def tenant_events(self, tenant_id: str) -> Iterator[StoredEvent]:
        events = super().tenant_events(tenant_id)  # already read, under the store's lock
        action, self.after_read = self.after_read, None
        if action is not None:
            action()
        return events


def ids(service: MemoryService, text: str) -> list[str]:
    return [hit.item.id for hit in service.search(WRITER, query(text)).items]


def test_a_subject_written_during_a_rebuild_is_indexed() -> None:
    """A write of a new subject lands between the rebuild's read of the log and its swap:
    the tenant is folded again, with the new subject's key, and its item is searchable
    (lexically and by its vector)."""
    store = WriteDuringFold()
    embedder = FakeEmbedder()
    settings = SearchSettings(embedder=embedder)
    service = MemoryService(
        store, Keyring(secrets.token_bytes(32)), clock=FakeClock(), search=settings
    )
    service.write(WRITER, body(id="a", content="A car.", subject_id="s1"))
    store.after_read = lambda: service.write(
        WRITER, body(id="b", content="Calls on Sundays.", subject_id="s2")
    )
    embedder.embedded.clear()
    assert service.maintenance.reindex() == 2
    # the write embedded its text; the first fold embedded "a"; the second fold kept that
    # entry and embedded only the new item
    assert embedder.embedded == ["Calls on Sundays.", "A car.", "Calls on Sundays."]
    assert ids(service, "sundays") == ["b"]
    assert ids(service, "telephone") == ["b"]


class SteadyTraffic(MemoryStore):
    """A store where, after every read of a tenant's log, each other tenant gets a write:
    about one write per tenant per fold, as under steady traffic."""

    def __init__(self) -> None:
        super().__init__()
        self.traffic: Callable[[str], object] | None = None

    def tenant_events(self, tenant_id: str) -> Iterator[StoredEvent]:
        events = super().tenant_events(tenant_id)
        if self.traffic is not None:
            self.traffic(tenant_id)
        return events


def test_a_rebuild_under_steady_writes_to_many_tenants_still_finishes() -> None:
    """Tenants folded together are swapped in together; one a write landed in meanwhile is
    folded again and swapped in alone, right after its fold, so writes to the tenants folded
    after it do not keep it out: 25 busy tenants are all rebuilt, each with every write."""
    store = SteadyTraffic()
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
    tenants = [f"t{n:02}" for n in range(25)]
    writers = {tenant: principal(tenant) for tenant in tenants}
    for tenant in tenants:
        service.write(writers[tenant], body(id="first"))
    written = dict.fromkeys(tenants, 1)

    def traffic(read: str) -> None:
        for tenant in tenants:
            if tenant != read:
                service.write(writers[tenant], body(id=f"m{written[tenant]}"))
                written[tenant] += 1

    store.traffic = traffic
    rebuilt = service.maintenance.rebuild()
    store.traffic = None
    assert rebuilt >= 25
    for tenant in tenants:
        page = service.browse(writers[tenant], limit=200)
        assert len(page.items) == written[tenant]
    assert service.verify_replay().differences == []


class ThresholdsSeen(MemoryStore):
    """A store that notes the garbage collector's thresholds at each swap, and can fail."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.seen: list[tuple[int, int, int]] = []
        self.fail = fail

    def rebuild(self, tenants: Sequence[TenantRebuild]) -> set[str]:
        self.seen.append(gc.get_threshold())
        if self.fail:
            raise StoreUnavailable("the disk is gone")
        return super().rebuild(tenants)


def test_a_rebuild_collects_garbage_less_often_and_restores_the_thresholds() -> None:
    """While a rebuild runs, CPython collects its youngest generation every
    ``REBUILD_GC_THRESHOLD`` allocations instead of the process's own threshold; the
    process's thresholds are back when it ends, whether it finished or failed."""
    before = gc.get_threshold()
    for fail in (False, True):
        store = ThresholdsSeen(fail)
        service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
        service.write(WRITER, body(id="a", content="email"))
        if fail:
            with pytest.raises(StoreUnavailable):
                service.maintenance.rebuild()
        else:
            assert service.maintenance.rebuild() == 1
        assert store.seen == [(reindex.REBUILD_GC_THRESHOLD, *before[1:])]
        assert gc.get_threshold() == before


def test_overlapping_rebuilds_restore_the_thresholds_only_when_the_last_ends() -> None:
    """Rebuilds may overlap on several threads: the first to end leaves the raised
    threshold to the one still running, and the last restores the process's own."""
    before = gc.get_threshold()
    with reindex._fewer_collections():
        with reindex._fewer_collections():
            assert gc.get_threshold()[0] == reindex.REBUILD_GC_THRESHOLD
        assert gc.get_threshold()[0] == reindex.REBUILD_GC_THRESHOLD
    assert gc.get_threshold() == before
