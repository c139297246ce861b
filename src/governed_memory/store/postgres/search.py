"""The PostgreSQL search: scope statistics, then the matches, hard-filtered in SQL.

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
    idf,
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
    """The candidates of ``request`` and its scope's statistics."""
    terms = list(dict.fromkeys(request.terms))
    if not terms:
        return SearchMatches(ScopeStatistics(0, 0, {}), [])
    rows = database.query(
        sql.SCOPE_STATISTICS,
        {
            "terms": terms,
            "tenant": request.tenant_id,
            "agent": request.agent_id,
            "purpose": request.purpose,
            "meta": SEARCH_INDEX,
        },
    )
    if not rows:  # no scope: nothing to find, whatever the index was built with
        return SearchMatches(ScopeStatistics(0, 0, {}), [])
    if not serves_index(rows[0][5], request.index_signature):
        raise StoreUnavailable.index_rebuilt()
    scope, documents, total_length = rows[0][:3]
    frequency = {int(row[3]): int(row[4]) for row in rows}
    statistics = ScopeStatistics(int(documents), int(total_length), frequency)
    if not any(frequency.values()):
        return SearchMatches(statistics, [])
    query, params = candidate_query(scope, request, statistics)
    candidates = []
    complete = True
    for memory_id, terms_, tfs, length, confidence, updated_at, tokens, pruned in database.query(
        query, params
    ):
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


def candidate_query(
    scope: int, request: SearchRequest, statistics: ScopeStatistics
) -> tuple[str, dict[str, Any]]:
    """The SQL that applies every hard filter of SPEC §6.1 inside the scope's postings.

    Each row is one match with its term frequencies, and whether matches were pruned.
    """
    terms = list(dict.fromkeys(request.terms))
    params: dict[str, Any] = {
        "scope": scope,
        "terms": terms,
        "weights": [idf(statistics.documents, statistics.document_frequency[t]) for t in terms],
        "tenant": request.tenant_id,
        "agent": request.agent_id,
        "purpose": request.purpose,
        "now": to_micros(request.now),
        "k1": K1,
        "b": B,
        "average": statistics.average_length,
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
        return sql.SUBJECT_CANDIDATES.format(item_kinds=item_kinds), params
    return sql.SCOPE_CANDIDATES.format(kinds=kinds, item_kinds=item_kinds), params


__all__ = ["candidate_query", "search"]
