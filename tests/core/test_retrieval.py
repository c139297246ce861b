"""Ranking and the token budget (SPEC §6.2, §6.3), as pure functions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_memory.core.retrieval import (
    SEMANTIC_ALPHA,
    STATIC_MAX,
    Candidate,
    Ranked,
    ScopeStatistics,
    fit_budget,
    idf,
    rank,
    recency,
    semantic_scale,
    term_upper_bound,
)
from tests.support.fakes import START


def candidate(memory_id: str, tfs: dict[int, int], tokens: int = 10, **kw: object) -> Candidate:
    data: dict[str, object] = {"length": 10, "confidence": 0.5, "updated_at": START}
    data.update(kw)
    return Candidate(memory_id, tfs, tokens=tokens, **data)  # type: ignore[arg-type]


def test_rarer_terms_weigh_more() -> None:
    """IDF falls as a term appears in more documents, and never goes negative."""
    assert idf(100, 1) > idf(100, 50) > idf(100, 100) >= 0


def test_recency_halves_after_the_half_life() -> None:
    """A 30-day-old item has half the recency of a new one."""
    assert recency(START, START) == 1.0
    assert recency(START, START + timedelta(days=30)) == 0.5


def test_rank_orders_by_score_then_id() -> None:
    """Best first, ties broken by id so every backend orders alike."""
    stats = ScopeStatistics(10, 100, {1: 1, 2: 9})
    ranked = rank(
        [candidate("b", {2: 1}), candidate("a", {2: 1}), candidate("z", {1: 1})],
        stats,
        [1, 2],
        START,
    )
    assert [r.candidate.memory_id for r in ranked] == ["z", "a", "b"]
    assert all(abs(r.score - sum(r.parts.values())) < 1e-12 for r in ranked)


@given(
    st.floats(0, 1),
    st.floats(0, 1),
    st.integers(0, 3650),
    st.integers(0, 3650),
)
def test_confidence_and_recency_only_break_near_ties(
    low_confidence: float, high_confidence: float, old_days: int, new_days: int
) -> None:
    """An item matching one more term, even one in half the scope, ranks above one that
    does not, whatever their confidence and age: the static parts add at most 0.15."""
    stats = ScopeStatistics(100, 1000, {1: 50, 2: 3})
    more = candidate(
        "more", {1: 1, 2: 1}, confidence=low_confidence, updated_at=START - timedelta(old_days)
    )
    fewer = candidate(
        "fewer", {2: 1}, confidence=high_confidence, updated_at=START - timedelta(new_days)
    )
    assert pytest.approx(0.15) == STATIC_MAX
    assert [r.candidate.memory_id for r in rank([fewer, more], stats, [1, 2], START)] == [
        "more",
        "fewer",
    ]


def test_the_semantic_part_weighs_a_cosine_against_the_query_bound() -> None:
    """With cosines, each score gains a semantic part, (1 − α)/α × Σ idf·(k1+1) × cosine
    (a negative cosine adds nothing), and items order as α·lexical/bound + (1 − α)·cosine."""
    stats = ScopeStatistics(10, 100, {1: 2, 2: 5})
    weights = {1: idf(10, 2), 2: idf(10, 5)}
    bound = term_upper_bound(weights[1]) + term_upper_bound(weights[2])
    scale = semantic_scale(weights)
    assert scale == (1 - SEMANTIC_ALPHA) / SEMANTIC_ALPHA * bound
    cosines = {"lexical": 0.1, "near": 0.9, "far": -0.4}
    found = rank(
        [candidate("lexical", {1: 1}), candidate("near", {}), candidate("far", {2: 1})],
        stats,
        [1, 2],
        START,
        cosines,
    )
    for hit in found:
        assert set(hit.parts) == {"lexical", "semantic", "confidence", "recency"}
        assert hit.parts["semantic"] == scale * max(0.0, cosines[hit.candidate.memory_id])
        assert abs(hit.score - sum(hit.parts.values())) < 1e-12
    fused = {
        h.candidate.memory_id: SEMANTIC_ALPHA * h.parts["lexical"] / bound
        + (1 - SEMANTIC_ALPHA) * max(0.0, cosines[h.candidate.memory_id])
        for h in found
    }
    assert [h.candidate.memory_id for h in found] == sorted(fused, key=lambda i: -fused[i])


def ranked(tokens: list[int]) -> list[Ranked]:
    return [
        Ranked(candidate(f"m{i}", {}, tokens=t), 1.0 - i / 100, {}) for i, t in enumerate(tokens)
    ]


def test_the_budget_skips_what_does_not_fit_and_keeps_walking() -> None:
    """A large item is skipped and counted; smaller lower-ranked ones still fit."""
    fitted = fit_budget(ranked([5, 50, 5, 5]), limit=10, budget=12)
    assert [r.candidate.memory_id for r in fitted.chosen] == ["m0", "m2"]
    assert fitted.used_tokens == 10
    assert fitted.skipped == 2


def test_the_limit_stops_the_walk() -> None:
    """Once limit items are chosen nothing more is counted."""
    fitted = fit_budget(ranked([1, 1, 1, 100]), limit=2, budget=1000)
    assert len(fitted.chosen) == 2
    assert fitted.skipped == 0


@given(st.lists(st.integers(1, 500), max_size=40), st.integers(1, 2000), st.integers(1, 100))
@settings(max_examples=200)
def test_the_budget_is_never_exceeded(tokens: list[int], budget: int, limit: int) -> None:
    """Whatever the items, what is chosen fits the budget and the limit, in rank order."""
    fitted = fit_budget(ranked(tokens), limit, budget)
    assert fitted.used_tokens == sum(r.candidate.tokens for r in fitted.chosen) <= budget
    assert len(fitted.chosen) <= limit
    order = [int(r.candidate.memory_id[1:]) for r in fitted.chosen]
    assert order == sorted(order)
