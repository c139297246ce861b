"""Search (SPEC §6): hard filters in the store's query, then ranking, then the token budget.

The store returns the candidates that pass every hard filter and share a query term; the
core ranks them and fits them to the budget. A store may prune candidates that cannot rank
in the first ``want`` places; when the budget skips so many that fewer than ``limit`` fit,
the search asks again, further down the ranking. The chosen items are then read, checked
against the filters once more, and decrypted.
"""

from __future__ import annotations

from datetime import datetime

from governed_memory.core.model import MemoryItem
from governed_memory.core.retrieval import (
    Fitted,
    Ranked,
    SearchQuery,
    admits,
    fit_budget,
    query_terms,
    rank,
)
from governed_memory.ports import Store
from governed_memory.records import SearchRequest
from governed_memory.results import SearchHit, SearchResult
from governed_memory.service.vault import Vault

#: How far down the ranking the token-budget walk may go (SPEC §6.3) before it stops.
MAX_BUDGET_WALK = 1_000


class Retrieval:
    """Searches one store; content is opened through the vault."""

    def __init__(self, store: Store, vault: Vault, tokenizer: str) -> None:
        self._store = store
        self._vault = vault
        self._tokenizer = tokenizer

    def search(self, tenant: str, query: SearchQuery, now: datetime) -> SearchResult:
        """The best items of the query's scope that fit its token budget (authorized)."""
        words = query_terms(query.query)
        if not words:
            return SearchResult([], 0, 0, self._tokenizer)
        term_ids = self._vault.term_ids(tenant, words)
        # One snapshot for every read of the search: a write landing between the read of
        # the postings and the read of the rows could otherwise rank an item on one state
        # and return it, or leave out a better one, from another.
        with self._store.snapshot():
            fitted = self._fit(tenant, query, term_ids, now)
            hits = self._hits(tenant, query, fitted.chosen, now)
        used = sum(hit.tokens for hit in hits)
        return SearchResult(hits, used, fitted.skipped, self._tokenizer)

    def _fit(self, tenant: str, query: SearchQuery, term_ids: list[int], now: datetime) -> Fitted:
        """Rank and fit to the budget, walking further down the ranking while it pays."""
        want = query.limit
        while True:
            matches = self._store.search(
                SearchRequest(
                    tenant_id=tenant,
                    agent_id=query.agent_id,
                    purpose=query.purpose,
                    terms=term_ids,
                    now=now,
                    subject_id=query.subject_id,
                    kinds=query.kinds,
                    want=want,
                )
            )
            ranked = rank(matches.candidates, matches.statistics, term_ids, now)
            # A pruned answer is exact only for its first ``want`` places.
            exact = (ranked if matches.complete else ranked[:want])[:MAX_BUDGET_WALK]
            fitted = fit_budget(exact, query.limit, query.token_budget)
            if matches.complete or len(fitted.chosen) >= query.limit:
                return fitted
            if fitted.used_tokens >= query.token_budget or want >= MAX_BUDGET_WALK:
                return fitted  # nothing more can fit, or the walk has gone deep enough
            want *= 4  # the budget skipped too much: walk further down the ranking

    def _hits(
        self, tenant: str, query: SearchQuery, chosen: list[Ranked], now: datetime
    ) -> list[SearchHit]:
        """The chosen items read and decrypted; any that changed since ranking is left out."""
        states = self._store.get_many(tenant, [r.candidate.memory_id for r in chosen])
        # One read for every subject key and one for every item key the hits need (a
        # request-long cache).
        subjects = {state.subject_id for state in states.values()}
        keys = self._vault.prefetch(tenant, subjects, list(states))
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
