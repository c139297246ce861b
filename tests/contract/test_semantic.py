"""Semantic recall (SPEC §6.2), on every backend, with a deterministic fake embedder:
vectors fused with lexical ranks inside the hard filters, explained as a score part, and
gone with the items they describe."""

from __future__ import annotations

from typing import Any

import pytest

from governed_memory.core.retrieval import SEMANTIC_ALPHA, admits, idf, semantic_scale
from governed_memory.core.values import Kind
from governed_memory.crypto import Keyring
from governed_memory.errors import CryptoError
from governed_memory.ports import Store
from governed_memory.records import SEARCH_INDEX, SearchRequest
from governed_memory.service import MemoryService
from governed_memory.service.indexing import SearchSettings
from governed_memory.service.vault import Vault
from tests.support.embedder import FakeEmbedder
from tests.support.fakes import FakeClock, body, principal, query, reviewer

WRITER = principal()


@pytest.fixture
def semantic(store: Store, keyring: Keyring, clock: FakeClock) -> MemoryService:
    """The service over each backend with semantic recall on (the fake embedder)."""
    return MemoryService(
        store, keyring, clock=clock, search=SearchSettings(embedder=FakeEmbedder())
    )


def ids(service: MemoryService, text: str, **search: object) -> list[str]:
    return [hit.item.id for hit in service.search(WRITER, query(text, **search)).items]


def test_an_item_sharing_no_word_with_the_query_is_found_by_meaning(
    semantic: MemoryService, service: MemoryService
) -> None:
    """The query "automobile" finds the memory about a car; with semantic recall off (a
    service over the same store) it does not."""
    semantic.write(WRITER, body(id="car", content="Drives a red car to work."))
    semantic.write(WRITER, body(id="tea", content="Likes green tea."))
    assert ids(semantic, "automobile") == ["car"]
    assert ids(service, "automobile") == []


def test_the_semantic_part_is_explained_and_added_to_the_score(semantic: MemoryService) -> None:
    """Every hit reports lexical, semantic, confidence and recency parts that sum to its
    score; the semantic part is (1 − α)/α × the query's bound × the cosine."""
    semantic.write(WRITER, body(id="car", content="Car car."))
    semantic.write(WRITER, body(id="other", content="Cars are parked outside."))
    (hit, *_) = semantic.search(WRITER, query("automobile")).items
    assert hit.item.id == "car"
    assert set(hit.score_parts) == {"lexical", "semantic", "confidence", "recency"}
    assert hit.score == pytest.approx(sum(hit.score_parts.values()))
    weight = idf(2, 0)  # "automobile" is in no item of the two
    assert SEMANTIC_ALPHA == 0.7
    assert hit.score_parts["semantic"] == pytest.approx(semantic_scale({1: weight}))  # cosine 1
    assert hit.score_parts["lexical"] == 0.0


def test_lexical_matches_and_nearest_items_are_ranked_together(semantic: MemoryService) -> None:
    """An item matching the query's words and near it in meaning ranks above one that is
    only near, which ranks above one that only matches a word."""
    semantic.write(WRITER, body(id="both", content="Refund the car payment."))
    semantic.write(WRITER, body(id="near", content="Money back for the automobile."))
    semantic.write(WRITER, body(id="word", content="The car colour is blue, like the sky."))
    semantic.write(WRITER, body(id="far", content="Likes green tea."))
    assert ids(semantic, "car refund") == ["both", "near", "word"]


@pytest.mark.parametrize(
    ("change", "gone"),
    [
        ({"agent_id": "sales-bot"}, "another agent"),
        ({"purpose": "billing"}, "another purpose"),
        ({"trust": "untrusted"}, "quarantined"),
        ({"ttl_seconds": 60}, "expired"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_the_nearest_item_outside_the_hard_filters_is_never_returned(
    semantic: MemoryService, clock: FakeClock, change: dict[str, object], gone: str
) -> None:
    """A perfect semantic match that another agent, purpose, status or expiry excludes
    is not returned, nor read: the store filters vectors like candidates."""
    semantic.write(WRITER, body(id="hidden", content="automobile automobile", **change))
    semantic.write(WRITER, body(id="seen", content="The car is in the garage, behind the shed."))
    clock.advance(minutes=5)
    assert ids(semantic, "automobile") == ["seen"], gone


def test_subject_kinds_and_tenant_filters_hold_for_vectors(semantic: MemoryService) -> None:
    """subject_id and kinds narrow semantic candidates; another tenant's are never seen."""
    semantic.write(WRITER, body(id="c1", content="A car.", subject_id="customer-1"))
    semantic.write(WRITER, body(id="c2", content="A car.", subject_id="customer-2"))
    semantic.write(WRITER, body(id="p1", content="A car.", kind="preference"))
    semantic.write(principal("globex"), body(id="theirs", content="A car."))
    assert ids(semantic, "automobile", subject_id="customer-2") == ["c2"]
    assert ids(semantic, "automobile", kinds=["preference"]) == ["p1"]
    assert sorted(ids(semantic, "automobile")) == ["c1", "c2", "p1"]


def test_an_items_vector_leaves_the_index_with_it(
    semantic: MemoryService, store: Store, clock: FakeClock
) -> None:
    """Forgotten, superseded and expired items have no vector left in the store; a
    promoted one gets its vector when it becomes searchable."""
    semantic.write(WRITER, body(id="forgotten", content="A car.", subject_id="victim"))
    semantic.write(WRITER, body(id="old", content="A car."))
    semantic.write(WRITER, body(id="new", content="A new car.", supersedes_id="old"))
    semantic.write(WRITER, body(id="brief", content="A car.", ttl_seconds=60))
    semantic.write(WRITER, body(id="pending", content="A car.", trust="untrusted"))
    semantic.forget_subject(WRITER, "victim")
    clock.advance(minutes=5)
    semantic.expire_due()
    semantic.promote(reviewer(), "pending", expected_version=1)
    request = SearchRequest("acme", "support-bot", "support", [], clock.now())
    assert sorted(v.memory_id for v in store.scope_vectors(request)) == ["new", "pending"]


def test_vectors_are_sealed_and_bound_to_their_item(semantic: MemoryService, store: Store) -> None:
    """A stored vector is ciphertext under its memory's own key: it opens for its own item,
    content version and purpose only."""
    semantic.write(WRITER, body(id="a", content="A car."))
    semantic.write(WRITER, body(id="b", content="A phone."))
    request = SearchRequest("acme", "support-bot", "support", [], semantic.clock.now())
    sealed = {v.memory_id: v for v in store.scope_vectors(request)}
    assert b"car" not in sealed["a"].blob
    keyring, vault = semantic.keyring, Vault(store, semantic.keyring)
    a, b = store.get("acme", "a"), store.get("acme", "b")
    assert a is not None and b is not None
    key_a, key_b = vault.content_key(a), vault.content_key(b)
    assert key_a is not None and key_b is not None
    assert len(keyring.open(key_a, sealed["a"].version, sealed["a"].blob, "vector")) == 16 * 4
    with pytest.raises(CryptoError):
        keyring.open(key_b, sealed["a"].version, sealed["a"].blob, "vector")
    with pytest.raises(CryptoError):
        keyring.open(key_a, sealed["a"].version, sealed["a"].blob, "content")


def test_a_query_without_terms_is_not_embedded(semantic: MemoryService) -> None:
    """Punctuation alone looks nothing up, semantically either."""
    semantic.write(WRITER, body(id="a", content="A car."))
    assert ids(semantic, "!!! ???") == []


def test_the_index_records_that_it_holds_vectors(
    store: Store, keyring: Keyring, clock: FakeClock
) -> None:
    """The signature of an index with vectors names the embedder and its dimensions."""
    settings = SearchSettings(embedder=FakeEmbedder())
    assert settings.signature == "analyzer=english/1;embedder=fake-concepts/16"
    assert SearchSettings().signature == "analyzer=english/1;embedder=off"
    assert store.meta(SEARCH_INDEX) is None  # recorded by the composition root, not here


@pytest.mark.parametrize(
    "narrowing",
    [{}, {"subject_id": "customer-2"}, {"kinds": frozenset({Kind.PREFERENCE})}],
    ids=["scope", "subject", "kinds"],
)
def test_the_store_returns_exactly_the_vectors_the_hard_filters_admit(
    semantic: MemoryService, store: Store, clock: FakeClock, narrowing: dict[str, Any]
) -> None:
    """scope_vectors applies every hard filter in the storage query: the items it returns
    are exactly the indexed items that core.retrieval.admits accepts."""
    semantic.write(WRITER, body(id="fact-1", content="A car."))
    semantic.write(WRITER, body(id="fact-2", content="A car.", subject_id="customer-2"))
    semantic.write(
        WRITER, body(id="pref-2", content="A car.", subject_id="customer-2", kind="preference")
    )
    semantic.write(WRITER, body(id="brief", content="A car.", ttl_seconds=60))
    semantic.write(WRITER, body(id="sales", content="A car.", agent_id="sales-bot"))
    semantic.write(WRITER, body(id="billing", content="A car.", purpose="billing"))
    semantic.write(principal("globex"), body(id="theirs", content="A car."))
    clock.advance(minutes=5)  # "brief" has expired, and no worker has marked it yet
    request = SearchRequest("acme", "support-bot", "support", [], clock.now(), **narrowing)
    returned = {vector.memory_id for vector in store.scope_vectors(request)}
    admitted = {
        item.id
        for item in store.tenant_items("acme")
        if admits(
            item,
            tenant_id="acme",
            agent_id="support-bot",
            purpose="support",
            now=clock.now(),
            subject_id=narrowing.get("subject_id"),
            kinds=narrowing.get("kinds"),
        )
    }
    assert returned == admitted
    assert returned  # the filters leave something to return
