"""The vault: subject and item keys, and content sealed and opened with them, over the
memory store."""

from __future__ import annotations

import dataclasses
import secrets

import pytest

from governed_memory.analysis import Analyzer
from governed_memory.core.model import ItemState
from governed_memory.crypto import Keyring
from governed_memory.errors import CryptoError
from governed_memory.records import Batch, ItemChange
from governed_memory.service import MemoryService
from governed_memory.service.vault import Vault
from governed_memory.store.memory import MemoryStore
from tests.support.fakes import FakeClock, body, principal

WRITER = principal()


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def keyring() -> Keyring:
    return Keyring(secrets.token_bytes(32))


@pytest.fixture
def vault(store: MemoryStore, keyring: Keyring) -> Vault:
    return Vault(store, keyring)


def written(store: MemoryStore, keyring: Keyring, memory_id: str, subject: str) -> ItemState:
    """An item written through the service, as the store keeps it (content sealed)."""
    service = MemoryService(store, keyring, clock=FakeClock())
    service.write(WRITER, body(id=memory_id, subject_id=subject, content=f"About {subject}."))
    state = store.get("acme", memory_id)
    assert state is not None
    return state


def test_a_subject_gets_a_key_only_when_asked_and_keeps_it(vault: Vault) -> None:
    """No key until minted; minting again returns the key the subject already has."""
    assert vault.subject_key("acme", "customer-1") is None
    minted = vault.subject_key_or_new("acme", "customer-1")
    assert vault.subject_key_or_new("acme", "customer-1") == minted
    assert vault.subject_key("acme", "customer-1") == minted
    assert vault.subject_key("globex", "customer-1") is None


def test_sealed_content_opens_again_for_its_item_only(
    store: MemoryStore, keyring: Keyring, vault: Vault
) -> None:
    """An item's blob decrypts; the same blob on another item fails authentication."""
    a = written(store, keyring, "a", "customer-1")
    b = written(store, keyring, "b", "customer-1")
    assert vault.decrypt(a) == "About customer-1."
    moved = dataclasses.replace(b, content=a.content)
    store.commit(Batch("acme", [], [ItemChange(moved, b.version)]))
    with pytest.raises(CryptoError):
        vault.decrypt(moved)


def test_an_item_forgotten_after_it_was_read_opens_to_nothing(
    store: MemoryStore, keyring: Keyring, vault: Vault
) -> None:
    """The key is gone because the subject was forgotten: no content, and no error."""
    state = written(store, keyring, "a", "customer-1")
    MemoryService(store, keyring, clock=FakeClock()).forget_subject(WRITER, "customer-1")
    assert vault.decrypt(state) is None
    assert vault.open_known(state, vault.prefetch("acme", {"customer-1"}, ["a"])) is None


def test_one_request_reads_each_key_once(
    store: MemoryStore, keyring: Keyring, vault: Vault
) -> None:
    """Prefetched keys serve every item of the request, subjects and items without a key
    included: no further read reaches the store."""
    a = written(store, keyring, "a", "customer-1")
    keys = vault.prefetch("acme", {"customer-1", "nobody"}, ["a", "unknown"])
    assert keys.subjects[("acme", "nobody")] is None
    assert keys.items[("acme", "unknown")] is None
    store.subject_key = None  # type: ignore[assignment,method-assign]  # no read may reach it
    store.item_key = None  # type: ignore[assignment,method-assign]
    assert vault.decrypt(a, keys) == "About customer-1."


def test_each_item_is_sealed_under_a_key_of_its_own(
    store: MemoryStore, keyring: Keyring, vault: Vault
) -> None:
    """Two items of one subject name two different keys, each stored wrapped for its item;
    a rewrite keeps its item's key."""
    a = written(store, keyring, "a", "customer-1")
    b = written(store, keyring, "b", "customer-1")
    assert a.content is not None and b.content is not None
    key_a, key_b = store.item_key("acme", "a"), store.item_key("acme", "b")
    assert key_a is not None and key_b is not None
    assert Keyring.key_id_of(a.content) == key_a.key_id != key_b.key_id
    MemoryService(store, keyring, clock=FakeClock()).write(
        WRITER, body(id="a", content="Rewritten.", expected_version=1)
    )
    rewritten = store.get("acme", "a")
    assert rewritten is not None and rewritten.content is not None
    assert Keyring.key_id_of(rewritten.content) == key_a.key_id
    assert store.item_key("acme", "a") == key_a


def test_the_postings_of_a_text_count_each_term(vault: Vault) -> None:
    """Repeated words add up under one keyed term id; the length counts every word."""
    doc = vault.index_doc("acme", Analyzer(), "Email, email and EMAILs.")
    assert doc.length == 4
    assert sorted(doc.terms.values()) == [1, 3]
    assert vault.index_doc("globex", Analyzer(), "email").terms.keys().isdisjoint(doc.terms)


def test_words_that_hash_to_one_term_id_add_up_under_it(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two words whose keyed ids clash (64 bits: never seen, but possible) are one term:
    its count is theirs together, and the length still counts every word."""
    clashing = {"email": 7, "news": 7, "and": 9}
    monkeypatch.setattr(vault, "term_ids", lambda tenant, words: [clashing[w] for w in words])
    doc = vault.index_doc("acme", Analyzer(), "Email, email and news.")
    assert doc.terms == {7: 3, 9: 1}
    assert doc.length == 4


def test_a_search_reads_the_keys_of_all_its_hits_at_once(
    store: MemoryStore, keyring: Keyring
) -> None:
    """The hits' subject and item keys come from one read each, not one read a hit."""
    service = MemoryService(store, keyring, clock=FakeClock())
    for number in range(5):
        service.write(WRITER, body(id=f"m{number}", subject_id=f"customer-{number}"))
    store.subject_key = None  # type: ignore[assignment,method-assign]  # no read may reach it
    store.item_key = None  # type: ignore[assignment,method-assign]
    hits = service.search(
        WRITER, {"agent_id": "support-bot", "purpose": "support", "query": "email"}
    )
    assert len(hits.items) == 5
    assert all(hit.item.content for hit in hits.items)


def test_a_destroyed_key_leaves_the_keyrings_cache(store: MemoryStore, keyring: Keyring) -> None:
    """Erase drops the item's unwrapped key from the process at once, and forget the keys
    of the subject's items with the subject's own: none waits for the cache to expire."""
    service = MemoryService(store, keyring, clock=FakeClock())
    for memory_id in ("a", "b"):
        service.write(WRITER, body(id=memory_id))
    ids = {m: key.key_id for m in ("a", "b") if (key := store.item_key("acme", m)) is not None}
    subject = store.subject_key("acme", "customer-1")
    assert subject is not None and all(i in keyring._unwrapped for i in ids.values())
    service.erase(principal(name="dpo"), "a")
    assert ids["a"] not in keyring._unwrapped and ids["b"] in keyring._unwrapped
    service.forget_subject(principal(name="dpo"), "customer-1")
    assert not {ids["b"], subject.key_id} & set(keyring._unwrapped)
