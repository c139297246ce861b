"""The search index of the in-memory reference store: documents and postings per scope.

:class:`~governed_memory.store.memory.MemoryStore` derives from it and changes the index
inside its commits and rebuilds; everything here takes the store's lock.
"""

from __future__ import annotations

from governed_memory.core.model import ItemState
from governed_memory.core.retrieval import Candidate, ScopeStatistics, admits
from governed_memory.core.values import Status
from governed_memory.errors import StoreUnavailable
from governed_memory.records import (
    SEARCH_INDEX,
    IndexDoc,
    IndexedContent,
    SealedVector,
    SearchFound,
    SearchMatches,
    SearchRequest,
    SearchRows,
    serves_index,
)
from governed_memory.store.memory_keys import MemoryKeys

ScopeKey = tuple[str, str, str]


class MemorySearch(MemoryKeys):
    """Index documents and per-scope posting lists over the store's items."""

    _items: dict[tuple[str, str], ItemState]  # the store's projection, set by the store
    #: Rows and keys come with the matches, under the same lock (Items.reads_rows_with_matches).
    reads_rows_with_matches = True
    rows_with_matches_partial = False

    def __init__(self) -> None:
        super().__init__()
        self._docs: dict[tuple[str, str], tuple[ScopeKey, IndexDoc]] = {}
        self._postings: dict[ScopeKey, dict[int, dict[str, int]]] = {}

    def _reindex(self, item: ItemState, index: IndexDoc | None) -> None:
        old = self._docs.pop(item.key, None)
        if old is not None:
            scope, doc = old
            for term in doc.terms:
                self._postings[scope][term].pop(item.id, None)
        if index is not None:
            scope = (item.tenant_id, item.agent_id, item.purpose)
            postings = self._postings.setdefault(scope, {})
            for term, frequency in index.terms.items():
                postings.setdefault(term, {})[item.id] = frequency
            self._docs[item.key] = (scope, index)

    def _check_index(self, signature: str | None) -> None:
        """Refuse a request made for another index than the one recorded (if any)."""
        if not serves_index(self._meta.get(SEARCH_INDEX), signature):
            raise StoreUnavailable.index_rebuilt()

    def search(self, request: SearchRequest) -> SearchMatches:
        with self._lock:
            self._check_index(request.index_signature)
            scope = (request.tenant_id, request.agent_id, request.purpose)
            postings = self._postings.get(scope, {})
            docs = [doc for s, doc in self._docs.values() if s == scope]
            statistics = ScopeStatistics(
                documents=len(docs),
                total_length=sum(doc.length for doc in docs),
                document_frequency={t: len(postings.get(t, {})) for t in request.terms},
            )
            frequencies: dict[str, dict[int, int]] = {}
            for term in request.terms:
                for memory_id, tf in postings.get(term, {}).items():
                    frequencies.setdefault(memory_id, {})[term] = tf
            candidates = []
            for memory_id in sorted(frequencies):
                item = self._items[(request.tenant_id, memory_id)]
                if not _admits(item, request):
                    continue
                _, doc = self._docs[item.key]
                candidates.append(
                    Candidate(
                        memory_id=memory_id,
                        term_frequencies=frequencies[memory_id],
                        length=doc.length,
                        confidence=item.confidence,
                        updated_at=item.updated_at,
                        tokens=item.tokens,
                    )
                )
            found = self._found(request.tenant_id, candidates) if request.rows else None
            return SearchMatches(statistics, candidates, found=found)

    def _found(self, tenant_id: str, candidates: list[Candidate]) -> SearchFound:
        """The candidates' rows and keys (the caller holds the lock)."""
        items = {c.memory_id: self._items[(tenant_id, c.memory_id)] for c in candidates}
        return SearchFound(
            items,
            {i.subject_id: self._keys.get((tenant_id, i.subject_id)) for i in items.values()},
            {memory_id: self._item_keys.get((tenant_id, memory_id)) for memory_id in items},
        )

    def scope_vectors(self, request: SearchRequest) -> list[SealedVector]:
        with self._lock:
            scope = (request.tenant_id, request.agent_id, request.purpose)
            found = []
            for key, (doc_scope, doc) in sorted(self._docs.items()):
                item = self._items[key]
                if doc_scope == scope and doc.vector is not None and _admits(item, request):
                    found.append(
                        SealedVector(
                            item.tenant_id,
                            item.id,
                            item.subject_id,
                            item.content_version,
                            doc.vector,
                            item.confidence,
                            item.updated_at,
                            item.tokens,
                        )
                    )
            return found

    def index_entries(self, tenant_id: str) -> dict[str, IndexedContent]:
        with self._lock:
            return {
                memory_id: IndexedContent(
                    item.content_version, item.content_hash, IndexDoc(dict(doc.terms), doc.length)
                )
                for (tenant, memory_id), (_, doc) in self._docs.items()
                if tenant == tenant_id
                and (item := self._items[(tenant, memory_id)]).status is Status.ACTIVE
            }

    def search_rows(self, tenant_id: str) -> dict[str, SearchRows]:
        with self._lock:
            found: dict[str, SearchRows] = {}
            for (tenant, memory_id), (scope, doc) in self._docs.items():
                if tenant == tenant_id:
                    terms, vector = dict(doc.terms), doc.vector is not None
                    found[memory_id] = SearchRows(
                        {(scope[1], scope[2])}, {}, doc.length, terms, vector
                    )
            for scope, postings in self._postings.items():
                for term, items in postings.items() if scope[0] == tenant_id else ():
                    for memory_id, tf in items.items():
                        rows = found.setdefault(memory_id, SearchRows())
                        rows.scopes.add((scope[1], scope[2]))
                        rows.postings[term] = tf
            return found


def _admits(item: ItemState, request: SearchRequest) -> bool:
    """Whether ``item`` passes every hard filter of ``request``."""
    return admits(
        item,
        tenant_id=request.tenant_id,
        agent_id=request.agent_id,
        purpose=request.purpose,
        now=request.now,
        subject_id=request.subject_id,
        kinds=request.kinds,
    )
