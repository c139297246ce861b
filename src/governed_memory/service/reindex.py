"""Rebuilding the projection and the search index from the log, safe against writes.

Each tenant's log is folded into items; an active item whose content the index already
holds (same content version and hash; its stored terms and frequencies) keeps that entry
without its content being opened, unless the settings change (``gmem reindex``) or
semantic recall is on (vectors are not kept with the entries); every other active item's
content is opened with its keys and indexed again under the service's search settings
(terms, and vectors when semantic recall is on). Tenants are folded one after another and
swapped in together, a few thousand items a transaction (``Store.rebuild``, which writes
only the rows that differ from the fold); the store leaves out a tenant an event landed
in after its fold, and that tenant is folded again and swapped in alone, right after its
fold, up to ``REBUILD_ATTEMPTS`` times (steady writes to many tenants never starve a whole
batch): index entries already made are kept (an entry depends only on an item's content
version), so a retry costs the new items only.

``gmem replay`` rebuilds under the settings the index was built with; ``gmem reindex``
rebuilds under new ones: it first records that a rebuild is under way, so every instance
still running with the old settings stops searching and indexing (a 503:
``StoreUnavailable.index_rebuilt``) rather than mixing terms of two analyzers, and records
the new signature once every tenant is done.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from governed_memory.core.events import Event, StoredEvent
from governed_memory.core.model import ItemState
from governed_memory.core.projection import replay
from governed_memory.core.values import Status
from governed_memory.errors import StoreUnavailable
from governed_memory.ports import Store
from governed_memory.records import (
    REBUILDING,
    SEARCH_INDEX,
    IndexDoc,
    IndexedContent,
    ItemChange,
    NothingIntact,
    TenantRebuild,
)
from governed_memory.service.indexing import Indexer
from governed_memory.service.vault import KeyCache, Vault

REBUILD_ATTEMPTS = 20
#: Item keys read at once.
KEY_PAGE = 5_000
#: Items swapped in by one transaction, at least (unless the log ends first): many small
#: tenants share a commit, and the pages their rows touch, instead of one each. The swap
#: holds the write lock while it reads the tenants' rows and writes what differs (about
#: a second for 10k items here when every row is written; writes wait, well within the
#: busy timeout); bigger swaps were a little faster still, smaller ones clearly slower.
SWAP_ITEMS = 10_000
#: Items indexed between two progress reports.
PROGRESS_STEP = 256
#: CPython's threshold for collecting its youngest generation while a rebuild runs (its
#: default is 700 allocations). A rebuild allocates millions of short-lived rows and
#: tuples, none of them in cycles, and every collection that reaches the oldest
#: generation walks every object alive, the tenants' rows it holds included: collecting
#: less often leaves the same garbage (freed by reference counting as before) for about
#: a tenth less CPU. The process's own thresholds are back when the last rebuild ends.
REBUILD_GC_THRESHOLD = 50_000


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a rebuild has come. ``items`` counts the active items to index in the
    tenants folded so far (it grows as tenants are folded); ``indexed`` those done."""

    tenants_done: int
    tenants: int
    indexed: int
    items: int


#: Told of the rebuild's progress (from the thread that runs it).
OnProgress = Callable[[Progress], None]

#: Index entries made during one tenant's rebuild, by (memory id, content version).
_Made = dict[tuple[str, int], IndexDoc]


class Rebuild:
    """One rebuild of every tenant, reporting its progress."""

    def __init__(
        self, store: Store, vault: Vault, indexer: Indexer, on_progress: OnProgress | None
    ) -> None:
        self._store = store
        self._vault = vault
        self._indexer = indexer
        self._report = on_progress or (lambda progress: None)
        self._tenants = self._done = self._indexed = self._items = 0

    def reindex(self) -> int:
        """Rebuild under this service's settings and record them as the index's: every
        active item's content is opened and analyzed again."""
        signature = self._indexer.signature
        self._store.replace_meta(SEARCH_INDEX, REBUILDING + signature)
        count = self._run(reuse=False)
        self._store.replace_meta(SEARCH_INDEX, signature)
        return count

    def run(self) -> int:
        """Rebuild every tenant under the settings the index was built with; the number
        of items. An item whose content the index already holds (same version and hash)
        keeps its entry, without opening its content; the others are indexed again."""
        return self._run(reuse=self._indexer.settings.embedder is None)

    def _run(self, *, reuse: bool) -> int:
        tenants = self._store.tenants()
        self._tenants = len(tenants)
        self._progress()
        with _fewer_collections(), self._store.rebuilding():
            # Tenants found intact ahead (worker processes, on SQLite) count as rebuilt if
            # nothing was committed since they were checked; every other tenant is folded
            # and swapped here.
            checked = self._store.check_intact(tenants) if reuse else NothingIntact()
            accepted = checked.accept()
            total = 0
            for tenant_id in accepted:
                intact = checked.tenants[tenant_id]
                self._items += intact.active
                self._indexed += intact.active
                self._done += 1
                total += intact.items
            if accepted:
                self._progress()
            total += self._rebuild([t for t in tenants if t not in accepted], reuse)
        return total

    def _rebuild(self, tenants: list[str], reuse: bool) -> int:
        """Fold ``tenants`` and swap them in, at least ``SWAP_ITEMS`` items a swap; the
        number of items."""
        total = 0
        pending: list[_Tenant] = []
        size = 0
        for tenant_id in tenants:
            tenant = _Tenant(tenant_id, self._store.index_entries(tenant_id) if reuse else {})
            size += self._fold(tenant)
            pending.append(tenant)
            if size >= SWAP_ITEMS:
                total += self._swap(pending)
                pending, size = [], 0
        return total + (self._swap(pending) if pending else 0)

    def _progress(self) -> None:
        self._report(Progress(self._done, self._tenants, self._indexed, self._items))

    def _fold(self, tenant: _Tenant) -> int:
        """Fold the tenant's log into the rows to swap in; how many."""
        read = _Read(self._store.tenant_events(tenant.id))
        # Folded as it is read: the fold keeps one state per item, never the whole log.
        items = [item for _, item in sorted(replay(read).items())]
        kept = _kept(tenant.held, items, tenant.made)
        self._items += kept  # counted as indexed: their entries are done
        self._indexed += kept
        self._index(tenant.id, items, tenant.made)
        changes = [ItemChange(item, 0, _entry(tenant.made, item)) for item in items]
        tenant.rows = TenantRebuild(tenant.id, changes, read.last)
        return len(changes)

    def _swap(self, pending: list[_Tenant]) -> int:
        """Swap the folded tenants in, in one transaction; a tenant a write landed in
        meanwhile is then folded again and swapped in on its own, right after its fold (its
        window for a write is one fold, not a batch's), up to ``REBUILD_ATTEMPTS`` times. The
        number of items swapped in."""
        moved = self._store.rebuild([tenant.rows for tenant in pending])
        swapped = sum(self._swapped(tenant) for tenant in pending if tenant.id not in moved)
        for tenant in pending:
            if tenant.id in moved:
                swapped += self._swap_alone(tenant)
        return swapped

    def _swap_alone(self, tenant: _Tenant) -> int:
        for _ in range(REBUILD_ATTEMPTS):
            self._fold(tenant)
            if not self._store.rebuild([tenant.rows]):
                return self._swapped(tenant)
        raise StoreUnavailable(f"tenant {tenant.id!r} kept writing during the rebuild; retry")

    def _swapped(self, tenant: _Tenant) -> int:
        self._done += 1
        self._progress()
        return len(tenant.rows.changes)

    def _index(self, tenant: str, items: list[ItemState], made: _Made) -> None:
        """Make the index entries of the active items that have none yet in ``made``."""
        active = [
            item
            for item in items
            if item.status is Status.ACTIVE and (item.id, item.content_version) not in made
        ]
        keys = active_keys(self._store, tenant, active)
        self._items += len(active)
        self._progress()
        for start in range(0, len(active), PROGRESS_STEP):
            # Opened a chunk at a time: the plaintext of the whole tenant is never held.
            todo = []
            for item in active[start : start + PROGRESS_STEP]:
                content = self._vault.open_known(item, keys)
                if content is not None:  # None: the key is gone, nothing left to index
                    todo.append((content, self._vault.content_key(item, keys), item))
            for (_, _, item), entry in zip(todo, self._indexer.docs(tenant, todo), strict=True):
                made[(item.id, item.content_version)] = entry
            self._indexed += len(active[start : start + PROGRESS_STEP])
            self._progress()


class _Collections:
    """How many rebuilds of this process are running, and the garbage collector's
    thresholds before the first of them began."""

    lock = threading.Lock()
    running = 0
    saved: tuple[int, int, int] = gc.get_threshold()


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Around a rebuild: the youngest generation collected every
    :data:`REBUILD_GC_THRESHOLD` allocations; the thresholds found are back when the last
    rebuild running in this process ends (rebuilds on several threads may overlap)."""
    with _Collections.lock:
        if _Collections.running == 0:
            _Collections.saved = gc.get_threshold()
            first = _Collections.saved[0]
            gc.set_threshold(max(first, REBUILD_GC_THRESHOLD), *_Collections.saved[1:])
        _Collections.running += 1
    try:
        yield
    finally:
        with _Collections.lock:
            _Collections.running -= 1
            if _Collections.running == 0:
                gc.set_threshold(*_Collections.saved)


def active_keys(store: Store, tenant: str, active: list[ItemState]) -> KeyCache:
    """The keys of the tenant's ``active`` items, read now (a few reads in all): a rebuild
    reads them for each fold, never reuses those of an earlier one, since a subject or an
    item written meanwhile has keys an earlier fold did not need."""
    subjects = sorted({item.subject_id for item in active})
    found = store.subject_keys_for(tenant, subjects)
    keys = KeyCache({(tenant, s): found.get(s) for s in subjects})
    ids = [item.id for item in active]
    for start in range(0, len(ids), KEY_PAGE):
        page = store.item_keys_for(tenant, ids[start : start + KEY_PAGE])
        keys.items.update({(tenant, memory_id): key for memory_id, key in page.items()})
    return keys


class _Tenant:
    """One tenant's rebuild: the index entries the index held when it began, those made
    since (kept across folds: an entry depends only on an item's content version), and
    the rows of its last fold."""

    def __init__(self, tenant_id: str, held: dict[str, IndexedContent]) -> None:
        self.id = tenant_id
        self.held = held
        self.made: _Made = {}
        self.rows = TenantRebuild(tenant_id, (), 0)


class _Read:
    """The events of a tenant's log as it is read, remembering the last one's position
    (the log the fold is of: ``Store.rebuild`` refuses it if the tenant moved on)."""

    def __init__(self, log: Iterator[StoredEvent]) -> None:
        self._log = log
        self.last = 0

    def __iter__(self) -> Iterator[Event]:
        for stored in self._log:
            self.last = stored.position
            yield stored.event


def _kept(held: dict[str, IndexedContent], items: list[ItemState], made: _Made) -> int:
    """Keep the entries the index already holds of items whose content it was made of
    (an entry depends only on the content, and the analyzer a rebuild does not change);
    how many were not kept already."""
    kept = 0
    for item in items:
        found = held.get(item.id)
        if (
            found is not None
            and item.status is Status.ACTIVE
            and found.content_version == item.content_version
            and found.content_hash == item.content_hash
            and (item.id, item.content_version) not in made
        ):
            made[(item.id, item.content_version)] = found.entry
            kept += 1
    return kept


def _entry(made: _Made, item: ItemState) -> IndexDoc | None:
    """The item's index entry if it is searchable (an entry made while it was active in
    an earlier fold is not one once it is no longer active)."""
    return made.get((item.id, item.content_version)) if item.status is Status.ACTIVE else None


__all__ = ["OnProgress", "Progress", "Rebuild", "active_keys"]
