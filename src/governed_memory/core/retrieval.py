"""Retrieval after the hard filters: explainable ranking and the token budget (SPEC §6).

The store has already applied every hard filter (tenant, agent, purpose, active, not
expired, subject, kinds) in its query; what reaches this module are the survivors that
share at least one term with the query (and, with semantic recall on, the scope's items
nearest the query's vector). Ranking is BM25 over the scope, plus a semantic part when on,
plus confidence and recency as tie-breakers, and every part is reported.

The constants here are the one source of the formula: both SQL backends put them into
their statements, and the SQLite top-k and the PostgreSQL pruning bound scores with them.
Terms come from :mod:`governed_memory.analysis` (the service hashes them before a store
sees them); this module only ever sees term ids.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from governed_memory.core.frozen import quick_init
from governed_memory.core.model import ItemState
from governed_memory.core.values import Kind, Status

#: BM25's term-frequency saturation.
K1 = 1.2
#: BM25's length normalization. Memories are short, and a longer memory is seldom a wordier
#: one: it says more. Full normalization (0.75) punished the informative ones; 0.3 keeps
#: some for the occasional pasted document (tuned on development data only: docs/concepts.md).
B = 0.3
#: Confidence and recency only break near-ties: together they add at most 0.15, less than
#: one matched term of even a common word (a term in half the scope has an IDF of 0.69),
#: so relevance decides and these order items of about equal relevance.
CONFIDENCE_WEIGHT = 0.1
RECENCY_WEIGHT = 0.05
RECENCY_HALF_LIFE_DAYS = 30.0
MICROS_PER_DAY = 86_400 * 1_000_000
#: The half-life in microseconds, for stores that keep instants as integer microseconds.
RECENCY_HALF_LIFE_MICROS = RECENCY_HALF_LIFE_DAYS * MICROS_PER_DAY
#: The most confidence and recency can add to a score (both parts are at most 1).
STATIC_MAX = CONFIDENCE_WEIGHT + RECENCY_WEIGHT
#: Semantic recall's weight: a fused score orders items as ``α · lexical / bound +
#: (1 − α) · cosine`` would, where ``bound`` is the most the query's terms can score.
SEMANTIC_ALPHA = 0.7


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A validated search within one (tenant, agent, purpose) scope."""

    agent_id: str
    purpose: str
    query: str
    subject_id: str | None = None
    kinds: frozenset[Kind] | None = None
    limit: int = 10
    token_budget: int = 1000


@quick_init
@dataclass(frozen=True, slots=True)
class Candidate:
    """A survivor of the hard filters with what ranking needs to know about it."""

    memory_id: str
    term_frequencies: Mapping[int, int]
    length: int
    confidence: float
    updated_at: datetime
    tokens: int


@dataclass(frozen=True, slots=True)
class ScopeStatistics:
    """Corpus statistics of one scope (its searchable items), for BM25."""

    documents: int
    total_length: int
    document_frequency: Mapping[int, int]

    @property
    def average_length(self) -> float:
        return self.total_length / self.documents if self.documents else 1.0


@quick_init
@dataclass(frozen=True, slots=True)
class Ranked:
    """A candidate with its score and the parts that make it up."""

    candidate: Candidate
    score: float
    parts: Mapping[str, float]


def admits(
    item: ItemState,
    *,
    tenant_id: str,
    agent_id: str,
    purpose: str,
    now: datetime,
    subject_id: str | None = None,
    kinds: frozenset[Kind] | None = None,
) -> bool:
    """The hard filters of a search (SPEC §6.1), on one item: the one statement of them.

    Every backend applies the same filters inside its storage query (SQL cannot call
    this); the in-memory store and the service's re-check of the rows it returns call it.
    """
    return (
        item.status is Status.ACTIVE
        and item.expires_at > now
        and (item.tenant_id, item.agent_id, item.purpose) == (tenant_id, agent_id, purpose)
        and (subject_id is None or item.subject_id == subject_id)
        and (kinds is None or item.kind in kinds)
    )


def idf(documents: int, frequency: int) -> float:
    """BM25's inverse document frequency, never negative."""
    return math.log(1.0 + (documents - frequency + 0.5) / (frequency + 0.5))


def recency(updated_at: datetime, now: datetime) -> float:
    """1 for an item changed now, 1/2 after one half-life, tending to 0 with age."""
    return _freshness(max((now - updated_at).total_seconds(), 0.0) / 86_400)


def _freshness(age_days: float) -> float:
    return 1.0 / (1.0 + age_days / RECENCY_HALF_LIFE_DAYS)


def lexical_part(
    weights: Mapping[int, float], frequencies: Mapping[int, int], length: int, average: float
) -> float:
    """BM25 of one item: each query term's ``weights[t]`` (its IDF) times its saturated,
    length-normalized frequency in the item, summed in the order of ``weights``."""
    norm = K1 * (1.0 - B + B * length / average)
    lexical = 0.0
    for term, weight in weights.items():
        tf = frequencies.get(term, 0)
        if tf:
            lexical += weight * tf * (K1 + 1.0) / (tf + norm)
    return lexical


def static_parts(confidence: float, age_days: float) -> tuple[float, float]:
    """The confidence and recency parts of a score: what an item adds to any query.

    With :func:`lexical_part`, the whole formula of :func:`rank`; the stores' SQL
    prefilters compute the same sum in SQL, and the core ranks their survivors again."""
    return CONFIDENCE_WEIGHT * confidence, RECENCY_WEIGHT * _freshness(age_days)


def term_upper_bound(weight: float) -> float:
    """The most one term of IDF ``weight`` can add: BM25 saturates below (k1 + 1) × IDF."""
    return weight * (K1 + 1.0)


def unseen_bound(lasts: Mapping[int, float], uppers: Mapping[int, float]) -> float:
    """The best score an item can have if it is in none of the terms' top lists.

    ``lasts[t]`` is the smallest value (term part + confidence + recency) in the top list
    of term ``t``, so an unseen item containing ``t`` has term part ≤ ``lasts[t]`` minus its
    own static part ``s``. Maximizing ``s + Σ min(upper, max(0, last - s))`` over
    ``s ∈ [0, STATIC_MAX]`` — piecewise linear, so at its breakpoints — bounds every unseen
    item (the threshold algorithm of Fagin et al., with BM25's saturation as the cap).
    Terms whose lists were read to the end are left out: no unseen item contains them.
    """
    if not lasts:
        return -math.inf
    # An unseen item holds some term t of an unfinished list, and its term part is not
    # negative, so its static part is at most last_t: at most the largest last value.
    cap = min(STATIC_MAX, max(lasts.values()))
    points = {0.0, cap}
    for term, last in lasts.items():
        points.update((last, last - uppers[term]))
    return max(
        s + sum(min(uppers[t], max(0.0, last - s)) for t, last in lasts.items())
        for s in points
        if 0.0 <= s <= cap
    )


def semantic_scale(weights: Mapping[int, float]) -> float:
    """What a cosine of 1 adds: ``(1 − α)/α`` times the most the query's terms can score.

    In BM25's units, so the tie-breaking parts weigh the same with or without semantic
    recall, and an item's score depends on itself and the scope's statistics only.
    """
    bound = sum(term_upper_bound(weight) for weight in weights.values())
    return (1.0 - SEMANTIC_ALPHA) / SEMANTIC_ALPHA * bound


def semantic_part(cosine: float, scale: float) -> float:
    """The semantic part of a score: a cosine (not below 0) times :func:`semantic_scale`."""
    return scale * max(0.0, cosine)


def rank(
    candidates: Iterable[Candidate],
    stats: ScopeStatistics,
    query: Sequence[int],
    now: datetime,
    cosines: Mapping[str, float] | None = None,
) -> list[Ranked]:
    """Every candidate scored and ordered best first; ties broken by id for determinism.

    With ``cosines`` (semantic recall on: each candidate's cosine to the query, by id),
    every score gains a ``semantic`` part.
    """
    weights = {t: idf(stats.documents, stats.document_frequency.get(t, 0)) for t in query}
    average = stats.average_length
    scale = semantic_scale(weights) if cosines is not None else 0.0
    ranked = []
    for c in candidates:
        age_days = max((now - c.updated_at).total_seconds(), 0.0) / 86_400
        confidence, fresh = static_parts(c.confidence, age_days)
        parts = {"lexical": lexical_part(weights, c.term_frequencies, c.length, average)}
        if cosines is not None:
            parts["semantic"] = semantic_part(cosines.get(c.memory_id, 0.0), scale)
        parts |= {"confidence": confidence, "recency": fresh}
        ranked.append(Ranked(c, sum(parts.values()), parts))
    ranked.sort(key=lambda r: (-r.score, r.candidate.memory_id))
    return ranked


@dataclass(frozen=True, slots=True)
class Fitted:
    """What fits in the token budget, and how many better-ranked items did not."""

    chosen: list[Ranked]
    used_tokens: int
    skipped: int


def fit_budget(ranked: Iterable[Ranked], limit: int, budget: int) -> Fitted:
    """Walk the ranking; skip (and count) what does not fit; stop at ``limit`` items or
    when the budget is spent."""
    chosen: list[Ranked] = []
    used = skipped = 0
    for item in ranked:
        if len(chosen) >= limit or used >= budget:
            break  # full, or nothing more can fit (every item costs at least one token)
        if used + item.candidate.tokens > budget:
            skipped += 1
            continue
        chosen.append(item)
        used += item.candidate.tokens
    return Fitted(chosen, used, skipped)
