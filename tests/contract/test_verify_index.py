"""``replay --verify`` compares the search index too (issue 13, defect 6), on every
backend: a store written through the service in every way an item can change verifies
clean, before and after a rebuild, with and without semantic recall; an item's missing
search rows are a divergence naming it."""

from __future__ import annotations

import secrets

import pytest

from governed_memory.core.model import ItemState
from governed_memory.core.values import Scope, Trust
from governed_memory.crypto import Keyring
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from governed_memory.service.indexing import SearchSettings
from governed_memory.service.vault import KeyCache, Vault
from tests.support.embedder import FakeEmbedder
from tests.support.fakes import FakeClock, body, principal, reviewer

WRITER = principal()
AGENT = principal(name="agent", trust=Trust.UNTRUSTED)
DPO = principal(name="dpo", scopes={Scope.SUBJECT_FORGET, Scope.MEMORY_READ})
QUERY = {"agent_id": "support-bot", "purpose": "support"}


def every_change(service: MemoryService, clock: FakeClock) -> None:
    """Items active, rewritten, superseded, quarantined, promoted, rejected, expired,
    erased and forgotten, in two tenants."""
    service.write(WRITER, body(id="active", content="Prefers email."))
    service.write(WRITER, body(id="rewritten", content="Calls on Mondays."))
    service.write(WRITER, body(id="rewritten", content="Calls on Fridays.", expected_version=1))
    service.write(WRITER, body(id="old", content="Lives in Paris."))
    service.write(WRITER, body(id="new", content="Lives in Lyon.", supersedes_id="old"))
    for name in ("quarantined", "promoted", "rejected"):
        service.write(AGENT, body(id=name, content=f"Maybe {name}.", trust="untrusted"))
    service.promote(reviewer(), "promoted", 1)
    service.reject(reviewer(), "rejected", 1, "wrong")
    service.write(WRITER, body(id="short", content="Temporary note.", ttl_seconds=60))
    service.write(WRITER, body(id="erased", content="Erase me."))
    service.erase(DPO, "erased")
    service.write(WRITER, body(id="gone", content="Forget me.", subject_id="customer-9"))
    service.forget_subject(DPO, "customer-9")
    service.write(principal("globex"), body(id="other", content="Prefers email."))
    clock.advance(seconds=61)
    assert service.expire_due() == 1


def test_a_store_changed_in_every_way_verifies_clean_with_its_index(
    service: MemoryService, clock: FakeClock
) -> None:
    """No false divergence: every status an item can reach has the search rows verify
    expects, as written and as rebuilt."""
    every_change(service, clock)
    report = service.verify_replay()
    assert report.differences == []
    service.maintenance.rebuild()
    assert service.verify_replay().differences == []


def test_a_rebuild_leaves_every_search_answering_and_scoring_as_before(
    service: MemoryService, clock: FakeClock
) -> None:
    """The rebuilt index finds, ranks and scores exactly as the one built write by write:
    its scopes' document counts and total lengths, which every score uses, included."""
    every_change(service, clock)
    searches = [QUERY | {"query": text} for text in ("email", "calls fridays", "lives", "maybe")]
    before = [service.search(WRITER, search).to_dict() for search in searches]
    assert all(result["items"] for result in before)
    service.maintenance.rebuild()
    assert [service.search(WRITER, search).to_dict() for search in searches] == before


def test_with_semantic_recall_on_every_searchable_item_has_its_vector(
    store: Store, clock: FakeClock
) -> None:
    """Vectors are search rows too: present for each searchable item, and only those."""
    settings = SearchSettings(embedder=FakeEmbedder())
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=clock, search=settings)
    every_change(service, clock)
    assert service.verify_replay().differences == []


def test_verify_under_other_search_settings_says_the_rows_were_not_compared(
    store: Store, keyring: Keyring, clock: FakeClock
) -> None:
    """Rows built by another analyzer would all differ: verify says once why it did not
    compare them, rather than reporting every item."""
    service = MemoryService(store, keyring, clock=clock)
    service.write(WRITER, body(id="active", content="Prefers email."))
    store.claim_meta("search_index", service.search_signature)
    german = SearchSettings(embedder=FakeEmbedder())
    other = MemoryService(store, keyring, clock=clock, search=german)
    (difference,) = other.verify_replay().differences
    assert difference.startswith("the search index was built with analyzer=")
    assert "its rows were not compared" in difference


def test_a_rebuild_keeps_what_the_index_holds_without_opening_content(
    service: MemoryService, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gmem replay`` reuses each active item's stored terms and frequencies (its content
    version and hash unchanged) and opens no content; ``gmem reindex`` opens every active
    item's, since new settings may analyze it otherwise. Both verify clean and search alike."""
    every_change(service, clock)
    before = [hit.item.id for hit in service.search(WRITER, {**QUERY, "query": "email"}).items]
    opened: list[str] = []
    original = Vault.open_known

    def counting(self: Vault, state: ItemState, keys: KeyCache) -> str | None:
        opened.append(state.id)
        return original(self, state, keys)

    monkeypatch.setattr(Vault, "open_known", counting)
    service.maintenance.rebuild()
    assert opened == []
    service.maintenance.reindex()
    assert sorted(set(opened)) == ["active", "new", "other", "promoted", "rewritten"]
    assert service.verify_replay().differences == []
    assert [hit.item.id for hit in service.search(WRITER, {**QUERY, "query": "email"}).items] == (
        before
    )
