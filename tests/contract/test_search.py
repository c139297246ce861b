"""Retrieval (SPEC §6): hard filters in the store, explainable ranking, the token budget."""

from __future__ import annotations

from dataclasses import replace

import pytest

from governed_memory.records import SearchRequest
from governed_memory.service import MemoryService
from tests.support.fakes import FakeClock, body, principal, query

WRITER = principal()


def ids(service: MemoryService, **search: object) -> list[str]:
    text = str(search.pop("text", "email"))
    return [h.item.id for h in service.search(WRITER, query(text, **search)).items]


def test_search_stays_inside_tenant_agent_and_purpose(service: MemoryService) -> None:
    """Items of another tenant, agent or purpose never appear, whatever the query."""
    service.write(WRITER, body(id="mine"))
    service.write(WRITER, body(id="sales", agent_id="sales-bot"))
    service.write(WRITER, body(id="billing", purpose="billing"))
    service.write(principal("globex"), body(id="theirs"))
    assert ids(service) == ["mine"]


def test_search_filters_by_subject_and_kinds(service: MemoryService) -> None:
    """Optional subject and kinds filters narrow the scope."""
    service.write(WRITER, body(id="f1"))
    service.write(WRITER, body(id="p1", kind="preference"))
    service.write(WRITER, body(id="f2", subject_id="customer-2"))
    assert ids(service, subject_id="customer-2") == ["f2"]
    assert ids(service, kinds=["preference"]) == ["p1"]
    assert sorted(ids(service, kinds=["fact", "preference"])) == ["f1", "f2", "p1"]


def test_only_matching_items_are_returned(service: MemoryService) -> None:
    """An item sharing no term with the query is not a result."""
    service.write(WRITER, body(id="a", content="Likes cats."))
    service.write(WRITER, body(id="b", content="Likes dogs."))
    assert ids(service, text="dogs") == ["b"]
    assert ids(service, text="giraffes") == []
    assert ids(service, text="!!! ???") == []


def test_ranking_is_explained_and_prefers_relevance(service: MemoryService) -> None:
    """Each result carries its score and its parts; rarer matching terms rank higher."""
    service.write(WRITER, body(id="common", content="The customer called about billing."))
    service.write(WRITER, body(id="rare", content="The customer mentioned a zeppelin."))
    service.write(WRITER, body(id="both", content="The customer called about a zeppelin."))
    hits = service.search(WRITER, query("zeppelin customer")).items
    assert hits[0].item.id in {"rare", "both"}
    assert hits[-1].item.id == "common"
    for hit in hits:
        assert set(hit.score_parts) == {"lexical", "confidence", "recency"}
        assert hit.score == pytest.approx(sum(hit.score_parts.values()))


def test_ranking_counts_confidence_and_recency(service: MemoryService, clock: FakeClock) -> None:
    """With equal text, higher confidence and more recent items rank first."""
    service.write(WRITER, body(id="old", content="Same words here.", confidence=0.9))
    clock.advance(days=60)
    service.write(WRITER, body(id="new", content="Same words here.", confidence=0.9))
    service.write(WRITER, body(id="doubtful", content="Same words here.", confidence=0.1))
    assert ids(service, text="same words") == ["new", "old", "doubtful"]


def test_the_limit_bounds_the_results(service: MemoryService) -> None:
    """No more than limit items come back."""
    for n in range(5):
        service.write(WRITER, body(id=f"m{n}"))
    assert len(ids(service, limit=3)) == 3


def test_items_over_the_budget_are_skipped_and_smaller_ones_still_fit(
    service: MemoryService,
) -> None:
    """The budget walk skips what does not fit, counts it, and keeps walking."""
    service.write(WRITER, body(id="big", content="zeppelin " * 400, confidence=1.0))
    service.write(WRITER, body(id="small", content="A zeppelin.", confidence=0.0))
    result = service.search(WRITER, query("zeppelin", token_budget=50))
    assert [h.item.id for h in result.items] == ["small"]
    assert result.skipped == 1
    assert result.used_tokens == result.items[0].tokens <= 50
    assert result.tokenizer in {"cl100k_base", "estimate:utf8_bytes/4"}


def test_used_tokens_never_exceed_the_budget(service: MemoryService) -> None:
    """Whatever the items, the results fit in the budget."""
    for n in range(12):
        service.write(WRITER, body(id=f"m{n}", content="email " * (n * 7 + 1)))
    result = service.search(WRITER, query("email", token_budget=100, limit=100))
    assert result.used_tokens <= 100
    assert result.used_tokens == sum(h.tokens for h in result.items)


def test_query_syntax_is_just_text(service: MemoryService) -> None:
    """SQL, FTS and wildcard syntax in a query match nothing special and break nothing."""
    service.write(WRITER, body(id="m1"))
    for text in ["*", "%", "' OR 1=1 --", 'email" OR "1', "NEAR(email phone)", "email*"]:
        found = ids(service, text=text)
        assert found in ([], ["m1"])


def test_a_tiny_budget_walks_a_bounded_part_of_the_ranking(service: MemoryService) -> None:
    """With room for nothing, the walk stops early instead of scanning the whole scope."""
    for n in range(30):
        service.write(WRITER, body(id=f"m{n}", content=f"zeppelin number {n} is large"))
    result = service.search(WRITER, query("zeppelin", token_budget=1))
    assert result.items == []
    assert 0 < result.skipped <= 30


def test_a_store_reading_rows_with_its_matches_returns_each_candidates_row_and_keys(
    service: MemoryService,
) -> None:
    """Asked for rows, such a store returns every candidate's current row and the keys that
    open it, from the same state; a forgotten subject's items are neither. A store that
    reads the hits after ranking (in a snapshot) answers the same candidates and no rows."""
    store = service.store
    service.write(WRITER, body(id="kept"))
    service.write(WRITER, body(id="other", subject_id="customer-2"))
    service.write(WRITER, body(id="gone", subject_id="customer-3"))
    service.forget_subject(WRITER, "customer-3")
    terms = list(service.index_doc("acme", "email").terms)
    request = SearchRequest(
        "acme", "support-bot", "support", terms, service.clock.now(), want=10, rows=True
    )
    if not store.reads_rows_with_matches:
        matches = store.search(request)
        assert {c.memory_id for c in matches.candidates} == {"kept", "other"}
        assert matches.found is None
        return
    for asked, memory_ids in (
        (request, {"kept", "other"}),
        (replace(request, subject_id="customer-2"), {"other"}),
    ):
        matches = store.search(asked)
        assert matches.found is not None
        assert {c.memory_id for c in matches.candidates} == memory_ids
        assert matches.found.items == {i: store.get("acme", i) for i in memory_ids}
        subjects = {matches.found.items[i].subject_id for i in memory_ids}
        assert matches.found.subject_keys == {s: store.subject_key("acme", s) for s in subjects}
        assert matches.found.item_keys == {i: store.item_key("acme", i) for i in memory_ids}
        assert all(key is not None for key in matches.found.subject_keys.values())
    nowhere = store.search(replace(request, purpose="billing"))
    assert nowhere.candidates == [] and nowhere.found is not None and not nowhere.found.items
