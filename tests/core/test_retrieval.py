"""Ranking and the token budget (SPEC §6.2, §6.3), as pure functions."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from governed_memory.core.retrieval import (
    Candidate,
    Ranked,
    ScopeStatistics,
    fit_budget,
    idf,
    query_terms,
    rank,
    recency,
    terms,
)
from tests.support.fakes import START


def candidate(memory_id: str, tfs: dict[int, int], tokens: int = 10, **kw: object) -> Candidate:
    data: dict[str, object] = {"length": 10, "confidence": 0.5, "updated_at": START}
    data.update(kw)
    return Candidate(memory_id, tfs, tokens=tokens, **data)  # type: ignore[arg-type]


def test_terms_are_case_folded_words() -> None:
    """Terms ignore case, punctuation and Unicode compatibility forms."""
    assert terms("Email, EMAIL! ｅｍａｉｌ") == {"email": 3}
    assert query_terms("b a b c") == ["b", "a", "c"]


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
