"""The PostgreSQL search in one statement: scope statistics and the matches, hard-filtered
in SQL.

With ``want`` set, the database also scores each match with the core's formula and
returns only those that can rank in the top ``want`` (and near-ties of the last), so a
common term in a large scope costs an aggregate in the server, not tens of thousands of
rows shipped to Python. The core then ranks the survivors exactly.
"""

from __future__ import annotations

from typing import Any

from governed_memory.core.retrieval import (
    CONFIDENCE_WEIGHT,
    K1,
    RECENCY_HALF_LIFE_MICROS,
    RECENCY_WEIGHT,
    B,
    Candidate,
    ScopeStatistics,
)
from governed_memory.core.values import from_micros, to_micros
from governed_memory.errors import StoreUnavailable
from governed_memory.records import (
    SEARCH_INDEX,
    SearchMatches,
    SearchRequest,
    serves_index,
)
from governed_memory.store.postgres import sql
from governed_memory.store.postgres.database import PostgresDatabase


def search(database: PostgresDatabase, request: SearchRequest) -> SearchMatches:
    """The candidates of ``request`` and its scope's statistics, in one statement."""
    terms = list(dict.fromkeys(request.terms))
    if not terms:
        return SearchMatches(ScopeStatistics(0, 0, {}), [])
    query, params = candidate_query(request)
    rows = database.query(query, params)
    if not rows:  # no scope: nothing to find, whatever the index was built with
        return SearchMatches(ScopeStatistics(0, 0, {}), [])
    _, documents, total_length, frequencies, recorded = rows[0][:5]
    if not serves_index(recorded, request.index_signature):
        raise StoreUnavailable.index_rebuilt()
    frequency = {t: int(n) for t, n in zip(terms, frequencies, strict=True)}
    statistics = ScopeStatistics(int(documents), int(total_length), frequency)
    candidates = []
    complete = True
    for memory_id, terms_, tfs, length, confidence, updated_at, tokens, pruned in (
        row[5:] for row in rows
    ):
        if memory_id is None:
            continue  # the statistics' row of a scope without a match
        complete = complete and not pruned
        candidates.append(
            Candidate(
                memory_id,
                dict(zip(terms_, tfs, strict=True)),
                length,
                confidence,
                from_micros(updated_at),
                tokens,
            )
        )
    return SearchMatches(statistics, candidates, complete)


def candidate_query(request: SearchRequest) -> tuple[str, dict[str, Any]]:
    """The one statement of a search (``sql.one_search``): the scope's statistics and
    every match under every hard filter of SPEC §6.1, scored and pruned in SQL.

    Each candidate row is one match with its term frequencies, and whether matches were
    pruned.
    """
    params: dict[str, Any] = {
        "terms": list(dict.fromkeys(request.terms)),
        "tenant": request.tenant_id,
        "agent": request.agent_id,
        "purpose": request.purpose,
        "meta": SEARCH_INDEX,
        "now": to_micros(request.now),
        "k1": K1,
        "b": B,
        "confidence_weight": CONFIDENCE_WEIGHT,
        "recency_weight": RECENCY_WEIGHT,
        "half_life": RECENCY_HALF_LIFE_MICROS,
        "want": request.want,
    }
    kinds = item_kinds = ""
    if request.kinds is not None:
        kinds = " AND d.kind = ANY (%(kinds)s::text[])"
        item_kinds = " AND m.kind = ANY (%(kinds)s::text[])"
        params["kinds"] = sorted(kind.value for kind in request.kinds)
    if request.subject_id is not None:
        params["subject"] = request.subject_id
        return sql.one_search(sql.SUBJECT_CANDIDATES.format(item_kinds=item_kinds)), params
    candidates = sql.SCOPE_CANDIDATES.format(kinds=kinds, item_kinds=item_kinds)
    return sql.one_search(candidates), params


__all__ = ["candidate_query", "search"]
