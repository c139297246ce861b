"""The PostgreSQL search in one statement: scope statistics and the matches, hard-filtered
in SQL.

With ``want`` set, the database also scores each match with the core's formula and
returns only those that can rank in the top ``want`` (and near-ties of the last), so a
common term in a large scope costs an aggregate in the server, not tens of thousands of
rows shipped to Python. The core then ranks the survivors exactly.

With ``rows`` set, each survivor also carries its row and its keys, so a whole lexical
search is this one statement: one round trip, and one snapshot (a statement's own) for
the scores, the rows and the keys, with no transaction to begin or end.
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
    SearchFound,
    SearchMatches,
    SearchRequest,
    serves_index,
)
from governed_memory.store.found import Found
from governed_memory.store.postgres import sql
from governed_memory.store.postgres.database import PostgresDatabase


def search(database: PostgresDatabase, request: SearchRequest) -> SearchMatches:
    """The candidates of ``request`` and its scope's statistics, in one statement."""
    terms = list(dict.fromkeys(request.terms))
    nothing = SearchMatches(
        ScopeStatistics(0, 0, {}), [], found=SearchFound({}, {}, {}) if request.rows else None
    )
    if not terms:
        return nothing
    query, params = candidate_query(request)
    rows = database.query(query, params)
    if not rows:  # no scope: nothing to find, whatever the index was built with
        return nothing
    _, documents, total_length, frequencies, recorded = rows[0][:5]
    if not serves_index(recorded, request.index_signature):
        raise StoreUnavailable.index_rebuilt()
    frequency = {t: int(n) for t, n in zip(terms, frequencies, strict=True)}
    statistics = ScopeStatistics(int(documents), int(total_length), frequency)
    candidates = []
    complete = True
    found = Found(request.tenant_id) if request.rows else None
    for row in rows:
        memory_id, terms_, tfs, length, confidence, updated_at, tokens, pruned = row[5:13]
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
        if found is not None:
            found.add(row[13:])
    return SearchMatches(
        statistics, candidates, complete, None if found is None else found.record()
    )


def candidate_query(request: SearchRequest) -> tuple[str, dict[str, Any]]:
    """The one statement of a search (``sql.one_search``): the scope's statistics and
    every match under every hard filter of SPEC §6.1, scored and pruned in SQL.

    Each candidate row is one match with its term frequencies, and whether matches were
    pruned; with ``request.rows``, then its row and keys (``sql.ROW_COLUMNS``).
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
    rows = sql.ROW_COLUMNS if request.rows else ""
    if request.subject_id is not None:
        params["subject"] = request.subject_id
        keys = sql.SUBJECT_KEY_JOINS if request.rows else ""
        candidates = sql.SUBJECT_CANDIDATES.format(item_kinds=item_kinds, rows=rows, keys=keys)
    else:
        keys = sql.KEY_JOINS if request.rows else ""
        candidates = sql.SCOPE_CANDIDATES.format(
            kinds=kinds, item_kinds=item_kinds, rows=rows, keys=keys
        )
    return sql.one_search(candidates), params


__all__ = ["candidate_query", "search"]
