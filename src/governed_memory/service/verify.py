"""``gmem replay --verify``: whether the projection and the search index are what the log
and the content make them, tenant by tenant.

The projection is compared item by item with the fold of the log. The search index is
compared item by item with what the items' content makes under the service's search
settings: a searchable item (active, its content and key alive) must have exactly the
postings and the document of its content's terms, under its own scope, and a vector when
semantic recall is on; any other item must have no search row at all. A row of no item
is reported too. Vectors are compared by presence only (they are sealed with a fresh
nonce, and embedding again would cost a model run per item). Every difference names the
tenant and the memory id, never content.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from governed_memory.core.model import ItemState
from governed_memory.core.projection import diff, replay
from governed_memory.core.values import Status
from governed_memory.errors import CryptoError
from governed_memory.ports import Store
from governed_memory.records import SEARCH_INDEX, IndexDoc, SearchRows
from governed_memory.results import ReplayReport
from governed_memory.service.indexing import Indexer
from governed_memory.service.progress import OnStep, Step, Tally, silent
from governed_memory.service.reindex import active_keys
from governed_memory.service.vault import KeyCache, Vault


class Verify:
    """One verification of every tenant's projection and search index."""

    def __init__(self, store: Store, vault: Vault, indexer: Indexer) -> None:
        self._store = store
        self._vault = vault
        self._indexer = indexer

    def run(self, on_step: OnStep = silent) -> ReplayReport:
        """Fold each tenant's log and compare; read each tenant's log, items, search rows
        and keys in one snapshot, so a write going on meanwhile is no difference.
        ``on_step`` is told of the events read (stage "verify")."""
        events = items = in_index = 0
        differences: list[str] = []
        index = self._index_comparable(differences)
        on_step(Step("verify", 0, None, "events"))
        for tenant in self._store.tenants():
            with self._store.snapshot():  # the log, the items and the index of one moment
                log = Tally(
                    (stored.event for stored in self._store.tenant_events(tenant)),
                    on_step,
                    Step("verify", events, None, "events"),
                )
                live = {item.key: item for item in self._store.tenant_items(tenant)}
                try:
                    rebuilt = replay(log)  # folded as it is read, never held whole
                except Exception as error:  # noqa: BLE001 - reported, not raised
                    differences.append(f"{tenant}: the log cannot be replayed: {error}")
                    rebuilt = None
                    for _ in log:  # the rest of the log still counts as read
                        pass
                rows = self._store.search_rows(tenant) if index else {}
                keys = active_keys(self._store, tenant, _searchable(live.values()))
            events = log.done
            items += len(live)
            on_step(Step("verify", events, None, "events"))
            if rebuilt is not None:
                differences.extend(diff(rebuilt, live))
            if index:
                found = list(self._index_differences(tenant, live.values(), rows, keys))
                in_index += len(found)
                differences.extend(found)
        on_step(Step("verify", events, events, "events"))
        return ReplayReport(events, items, differences, in_index)

    def _index_comparable(self, differences: list[str]) -> bool:
        """Whether the index was built with this service's settings (else its rows cannot
        be compared with what these settings make: that is said, once)."""
        recorded = self._store.meta(SEARCH_INDEX)
        if recorded is None or recorded == self._indexer.signature:
            return True
        differences.append(
            f"the search index was built with {recorded}, not {self._indexer.signature}: "
            "its rows were not compared (verify with the settings it was built with)"
        )
        return False

    def _index_differences(
        self,
        tenant: str,
        items: Iterable[ItemState],
        rows: dict[str, SearchRows],
        keys: KeyCache,
    ) -> Iterator[str]:
        for item in sorted(items, key=lambda state: state.id):
            found = rows.pop(item.id, None)
            difference = self._item_difference(item, found, keys)
            if difference is not None:
                yield f"{tenant}/{item.id}: {difference}"
        for memory_id in sorted(rows):
            yield f"{tenant}/{memory_id}: search rows of no item of the tenant"

    def _item_difference(
        self, item: ItemState, found: SearchRows | None, keys: KeyCache
    ) -> str | None:
        """How the item's search rows differ from what its content makes, if they do."""
        try:
            want = self._expected(item, keys)
        except CryptoError:
            return "its content cannot be opened, so its search rows were not compared"
        if want is None:
            if found is None:
                return None
            return f"in the search index, but not searchable ({item.status.value})"
        if found is None:
            return "searchable, but missing from the search index"
        wrong = []
        if found.scopes != {(item.agent_id, item.purpose)}:
            wrong.append("scope")
        if found.postings != dict(want.terms):
            wrong.append("postings")
        if found.length != want.length or found.terms != dict(want.terms):
            wrong.append("document")
        if found.vector != (self._indexer.settings.embedder is not None):
            wrong.append("vector")
        return f"search rows differ from its content's: {', '.join(wrong)}" if wrong else None

    def _expected(self, item: ItemState, keys: KeyCache) -> IndexDoc | None:
        """The terms and length the item's rows must hold; ``None``: it has none."""
        if item.status is not Status.ACTIVE:
            return None
        content = self._vault.open_known(item, keys)
        if content is None:  # its key is gone: nothing left to index
            return None
        analyzer = self._indexer.settings.analyzer_for(item.tenant_id)
        return self._vault.index_doc(item.tenant_id, analyzer, content)


def _searchable(items: Iterable[ItemState]) -> list[ItemState]:
    return [item for item in items if item.status is Status.ACTIVE and item.content is not None]


__all__ = ["Verify"]
