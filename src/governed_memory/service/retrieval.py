"""Search (SPEC §6): hard filters in the store's query, then ranking, then the token budget.

The store returns the candidates that pass every hard filter and share a query term; the
core ranks them and fits them to the budget. A store may prune candidates that cannot rank
in the first ``want`` places; when the budget skips so many that fewer than ``limit`` fit,
the search asks again, further down the ranking. The chosen items are then read, checked
against the filters once more, and decrypted. A store that reads the candidates' rows and
keys with the matches (PostgreSQL: in the search's one statement; SQLite: with the
statement that checks the candidates' filters, in the snapshot of its matches) is asked
for them, and each round of a lexical search is then one call of the store; a store whose
rows may leave candidates out (SQLite, with many of them) is searched in a snapshot and
the hits left out are read in it; otherwise every read of the search shares one snapshot.

With semantic recall on, the store also returns the sealed vectors of the scope's items
that pass the same hard filters; they are opened, and each item's cosine to the query's
vector is its semantic part. The candidates are then every lexical match (unpruned) and
the :data:`SEMANTIC_POOL` × ``limit`` items nearest the query, ranked together.
"""

from __future__ import annotations

import contextlib
import heapq
import operator
from collections.abc import Mapping, Sequence
from datetime import datetime

from governed_memory.core.model import ItemState, MemoryItem
from governed_memory.core.retrieval import (
    Candidate,
    Fitted,
    Ranked,
    SearchQuery,
    admits,
    fit_budget,
    rank,
)
from governed_memory.ports import Store
from governed_memory.records import SearchMatches, SearchRequest
from governed_memory.results import SearchHit, SearchResult
from governed_memory.service.indexing import Indexer, Query
from governed_memory.service.vault import KeyCache, Vault

#: How far down the ranking the token-budget walk may go (SPEC §6.3) before it stops.
MAX_BUDGET_WALK = 1_000
#: With semantic recall, the items nearest the query join the candidates: this many per
#: result asked for (the lexical matches already cover most of what is near).
SEMANTIC_POOL = 2


class Retrieval:
    """Searches one store; content is opened through the vault."""

    def __init__(self, store: Store, vault: Vault, indexer: Indexer, tokenizer: str) -> None:
        self._store = store
        self._vault = vault
        self._indexer = indexer
        self._tokenizer = tokenizer

    def search(self, tenant: str, query: SearchQuery, now: datetime) -> SearchResult:
        """The best items of the query's scope that fit its token budget (authorized)."""
        looked_up = self._indexer.query(tenant, query.query)  # embedding: before the snapshot
        if not looked_up.terms:
            return SearchResult([], 0, 0, self._tokenizer)
        if looked_up.vector is None and self._store.reads_rows_with_matches:
            # Each search of the store returns its candidates' rows and keys with their
            # scores, from one state: the hits are opened from the last one. A store whose
            # rows may leave candidates out is searched in a snapshot, and the hits left
            # out are read in it.
            partial = getattr(self._store, "rows_with_matches_partial", False)
            with self._store.snapshot() if partial else contextlib.nullcontext():
                fitted, matches = self._fit(tenant, query, looked_up.terms, now, rows=True)
                assert matches.found is not None  # the store reads rows with its matches
                found = matches.found
                keys = KeyCache(
                    {(tenant, subject): key for subject, key in found.subject_keys.items()},
                    {(tenant, memory_id): key for memory_id, key in found.item_keys.items()},
                )
                left_out = [r for r in fitted.chosen if r.candidate.memory_id not in found.items]
                if left_out and partial:
                    hits = self._hits(tenant, query, fitted.chosen, now, keys, found.items)
                else:
                    hits = self._open(tenant, query, fitted.chosen, now, found.items, keys)
            return self._result(hits, fitted)
        # One snapshot for every read of the search: a write landing between the read of
        # the postings and the read of the rows could otherwise rank an item on one state
        # and return it, or leave out a better one, from another.
        with self._store.snapshot():
            keys = KeyCache()
            if looked_up.vector is None:
                fitted, _ = self._fit(tenant, query, looked_up.terms, now, rows=False)
            else:
                fitted = self._fused(tenant, query, looked_up, now, keys)
            hits = self._hits(tenant, query, fitted.chosen, now, keys)
        return self._result(hits, fitted)

    def _result(self, hits: list[SearchHit], fitted: Fitted) -> SearchResult:
        used = sum(hit.tokens for hit in hits)
        return SearchResult(hits, used, fitted.skipped, self._tokenizer)

    def _request(
        self,
        tenant: str,
        query: SearchQuery,
        terms: list[int],
        now: datetime,
        want: int | None,
        rows: bool = False,
    ) -> SearchRequest:
        return SearchRequest(
            tenant_id=tenant,
            agent_id=query.agent_id,
            purpose=query.purpose,
            terms=terms,
            now=now,
            subject_id=query.subject_id,
            kinds=query.kinds,
            want=want,
            index_signature=self._indexer.signature,
            rows=rows,
        )

    def _fit(
        self, tenant: str, query: SearchQuery, term_ids: list[int], now: datetime, *, rows: bool
    ) -> tuple[Fitted, SearchMatches]:
        """Rank and fit to the budget, walking further down the ranking while it pays; the
        fit and the matches it was made from."""
        want = query.limit
        while True:
            request = self._request(tenant, query, term_ids, now, want, rows)
            matches = self._store.search(request)
            ranked = rank(matches.candidates, matches.statistics, term_ids, now)
            # A pruned answer is exact only for its first ``want`` places.
            exact = (ranked if matches.complete else ranked[:want])[:MAX_BUDGET_WALK]
            fitted = fit_budget(exact, query.limit, query.token_budget)
            if matches.complete or len(fitted.chosen) >= query.limit:
                return fitted, matches
            if fitted.used_tokens >= query.token_budget or want >= MAX_BUDGET_WALK:
                return fitted, matches  # nothing more can fit, or the walk has gone deep enough
            # The budget skipped too much: walk further down the ranking, never past
            # where the walk stops (a store reads no row beyond it).
            want = min(want * 4, MAX_BUDGET_WALK)

    def _fused(
        self, tenant: str, query: SearchQuery, looked_up: Query, now: datetime, keys: KeyCache
    ) -> Fitted:
        """Lexical matches and the nearest vectors, inside the hard filters, ranked together.

        Every match is asked for (a pruned lexical answer would not be exact once semantic
        parts are added). Every eligible vector is opened, so every candidate gets its
        cosine; the nearest items that share no term join the candidates.
        """
        request = self._request(tenant, query, looked_up.terms, now, None)
        matches = self._store.search(request)
        sealed = self._store.scope_vectors(request)
        found = self._vault.prefetch(
            tenant, {v.subject_id for v in sealed}, [v.memory_id for v in sealed]
        )
        keys.subjects.update(found.subjects)
        keys.items.update(found.items)
        assert looked_up.vector is not None
        cosines = {
            vector.memory_id: _dot(looked_up.vector, self._vault.open_vector(vector, keys))
            for vector in sealed
        }
        lexical = {c.memory_id for c in matches.candidates}
        nearest = heapq.nlargest(
            SEMANTIC_POOL * query.limit,
            (v for v in sealed if v.memory_id not in lexical and cosines[v.memory_id] > 0),
            key=lambda v: (cosines[v.memory_id], v.memory_id),
        )
        candidates = [
            *matches.candidates,
            *(Candidate(v.memory_id, {}, 0, v.confidence, v.updated_at, v.tokens) for v in nearest),
        ]
        ranked = rank(candidates, matches.statistics, looked_up.terms, now, cosines)
        return fit_budget(ranked[:MAX_BUDGET_WALK], query.limit, query.token_budget)

    def _hits(
        self,
        tenant: str,
        query: SearchQuery,
        chosen: list[Ranked],
        now: datetime,
        keys: KeyCache,
        known: Mapping[str, ItemState] | None = None,
    ) -> list[SearchHit]:
        """The chosen items read (those not ``known`` already, read in the same state) and
        decrypted; any that changed since ranking is left out."""
        known = known or {}
        unread = [r.candidate.memory_id for r in chosen if r.candidate.memory_id not in known]
        states = {**known, **self._store.get_many(tenant, unread)}
        # One read for every subject key and one for every item key the hits need that the
        # request has not read yet (a request-long cache).
        subjects = {state.subject_id for state in states.values()} - {s for _, s in keys.subjects}
        memory_ids = [i for i in states if (tenant, i) not in keys.items]
        if subjects or memory_ids:
            more = self._vault.prefetch(tenant, subjects, memory_ids)
            keys.subjects.update(more.subjects)
            keys.items.update(more.items)
        return self._open(tenant, query, chosen, now, states, keys)

    def _open(
        self,
        tenant: str,
        query: SearchQuery,
        chosen: list[Ranked],
        now: datetime,
        states: Mapping[str, ItemState],
        keys: KeyCache,
    ) -> list[SearchHit]:
        """The chosen items, checked against the filters once more and decrypted with
        ``keys``."""
        hits = []
        for r in chosen:
            state = states.get(r.candidate.memory_id)
            if state is None or not admits(
                state,
                tenant_id=tenant,
                agent_id=query.agent_id,
                purpose=query.purpose,
                now=now,
                subject_id=query.subject_id,
                kinds=query.kinds,
            ):
                continue  # changed between the two reads: never return what the filters refuse
            item = MemoryItem.from_state(state, self._vault.decrypt(state, keys))
            hits.append(SearchHit(item, r.score, r.parts, r.candidate.tokens))
        return hits


def _dot(left: Sequence[float], right: Sequence[float]) -> float:
    """The cosine of two unit vectors."""
    return float(sum(map(operator.mul, left, right)))
