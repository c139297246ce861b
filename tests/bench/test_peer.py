"""The peer harness's client-side ranking: what a LangGraph user would run over a scope."""

from __future__ import annotations

from bench.peer import bm25


def test_bm25_ranks_the_text_holding_the_rarer_query_word_first() -> None:
    texts = ["the cat sat", "the dog sat", "a zebra and the cat", "nothing here"]
    assert bm25("zebra cat", texts, 10) == [2, 0]


def test_bm25_returns_at_most_limit_texts_and_none_without_a_match() -> None:
    texts = [f"word{i} common" for i in range(20)]
    assert len(bm25("common", texts, 10)) == 10
    assert bm25("absent", texts, 10) == []
    assert bm25("common", [], 10) == []
