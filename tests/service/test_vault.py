"""The vault: subject keys, and content sealed and opened with them, over the memory store."""

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
    assert vault.open_with(None, state) is None


def test_one_request_reads_each_subject_key_once(
    store: MemoryStore, keyring: Keyring, vault: Vault
) -> None:
    """Prefetched keys serve every item of the request, subjects without a key included."""
    a = written(store, keyring, "a", "customer-1")
    keys = vault.prefetch("acme", {"customer-1", "nobody"})
    assert keys[("acme", "nobody")] is None
    store.subject_key = None  # type: ignore[assignment,method-assign]  # no read may reach it
    assert vault.decrypt(a, keys) == "About customer-1."


def test_the_postings_of_a_text_count_each_term(vault: Vault) -> None:
    """Repeated words add up under one keyed term id; the length counts every word."""
    doc = vault.index_doc("acme", Analyzer(), "Email, email and EMAILs.")
    assert doc.length == 4
    assert sorted(doc.terms.values()) == [1, 3]
    assert vault.index_doc("globex", Analyzer(), "email").terms.keys().isdisjoint(doc.terms)
