"""The search index records how it was built; nothing serves it with other settings, and a
reindex rebuilds it from the log (SPEC §6.2), on every backend."""

from __future__ import annotations

import pytest

from governed_memory.analysis import Analyzer
from governed_memory.crypto import Keyring
from governed_memory.errors import ConfigError, StoreUnavailable
from governed_memory.ports import Store
from governed_memory.records import REBUILDING, SEARCH_INDEX
from governed_memory.service import MemoryService
from governed_memory.service.indexing import SearchSettings, check_index
from governed_memory.service.reindex import Progress
from tests.support.embedder import FakeEmbedder
from tests.support.fakes import FakeClock, body, principal, query

WRITER = principal()
ENGLISH = SearchSettings()
GERMAN = SearchSettings(Analyzer("german"))


def over(
    store: Store, keyring: Keyring, clock: FakeClock, settings: SearchSettings
) -> MemoryService:
    return MemoryService(store, keyring, clock=clock, search=settings)


def ids(service: MemoryService, text: str) -> list[str]:
    return [hit.item.id for hit in service.search(WRITER, query(text)).items]


def test_an_empty_store_records_the_settings_of_its_first_service(store: Store) -> None:
    """The first check on an empty store claims it; the same settings pass again, other
    settings are refused in one line that says to run gmem reindex."""
    check_index(store, GERMAN, empty=True)
    assert store.meta(SEARCH_INDEX) == "analyzer=german/1;embedder=off"
    check_index(store, GERMAN, empty=True)
    with pytest.raises(ConfigError) as refused:
        check_index(store, ENGLISH, empty=True)
    message = refused.value.detail
    assert "was built with analyzer=german/1;embedder=off" in message
    assert "not analyzer=english/1;embedder=off" in message
    assert "gmem reindex" in message and "\n" not in message


def test_a_store_indexed_before_settings_were_recorded_is_refused(store: Store) -> None:
    """A store with events but no recorded signature (built before this was recorded) must
    be reindexed: it could hold terms of the old tokenizer."""
    with pytest.raises(ConfigError, match="records no analyzer"):
        check_index(store, ENGLISH, empty=False)
    assert store.meta(SEARCH_INDEX) is None


def test_an_interrupted_reindex_is_refused_until_run_again(store: Store) -> None:
    """While (or after an interrupted) reindex, no instance starts, whatever its settings."""
    store.replace_meta(SEARCH_INDEX, REBUILDING + ENGLISH.signature)
    with pytest.raises(ConfigError, match="being rebuilt, or its rebuild was interrupted"):
        check_index(store, ENGLISH, empty=False)


def test_reindex_rebuilds_with_new_settings_and_records_them(
    store: Store, keyring: Keyring, clock: FakeClock
) -> None:
    """An index of English terms is not searched with the German analyzer (it would miss
    inflections); after a reindex with it, the index holds German stems and records it."""
    english = over(store, keyring, clock, ENGLISH)
    check_index(store, ENGLISH, empty=True)
    english.write(WRITER, body(id="k", content="Die Kunden bevorzugen E-Mails."))
    german = over(store, keyring, clock, GERMAN)
    with pytest.raises(StoreUnavailable, match="rebuilt with other settings"):
        german.search(WRITER, query("Kunde"))
    assert german.maintenance.reindex() == 1
    assert store.meta(SEARCH_INDEX) == GERMAN.signature
    assert ids(german, "Kunde") == ["k"]


def test_an_instance_left_with_old_settings_refuses_to_search_or_index(
    store: Store, keyring: Keyring, clock: FakeClock
) -> None:
    """Once a reindex records other settings, a service still running with the old ones
    answers searches and indexing writes with StoreUnavailable (503), never mixed results;
    what indexes nothing (a quarantined write, a forget) still works."""
    old = over(store, keyring, clock, ENGLISH)
    check_index(store, ENGLISH, empty=True)
    old.write(WRITER, body(id="a"))
    over(store, keyring, clock, GERMAN).maintenance.reindex()
    with pytest.raises(StoreUnavailable, match="rebuilt with other settings") as refused:
        old.search(WRITER, query("email"))
    assert isinstance(refused.value, StoreUnavailable)
    with pytest.raises(StoreUnavailable, match="rebuilt with other settings"):
        old.write(WRITER, body(id="b"))
    assert store.get("acme", "b") is None  # nothing of the refused batch was written
    old.write(WRITER, body(id="c", trust="untrusted"))
    assert old.forget_subject(WRITER, "customer-1").affected == 2


def test_reindex_adds_vectors_when_semantic_recall_is_turned_on(
    store: Store, keyring: Keyring, clock: FakeClock
) -> None:
    """A store built without vectors gets them from a reindex with an embedder, and
    semantic search works from then on."""
    lexical = over(store, keyring, clock, ENGLISH)
    lexical.write(WRITER, body(id="car", content="Drives a car."))
    semantic = over(store, keyring, clock, SearchSettings(embedder=FakeEmbedder()))
    assert ids(semantic, "automobile") == []
    semantic.maintenance.reindex()
    assert ids(semantic, "automobile") == ["car"]
    assert store.meta(SEARCH_INDEX) == "analyzer=english/1;embedder=fake-concepts/16"


def test_reindex_reports_its_progress(store: Store, keyring: Keyring, clock: FakeClock) -> None:
    """The callback hears of every tenant and every item indexed, the last report being
    all of them; items not searchable are not counted."""
    service = over(store, keyring, clock, ENGLISH)
    for n in range(5):
        service.write(WRITER, body(id=f"a{n}"))
    service.write(WRITER, body(id="q", trust="untrusted"))
    service.write(principal("globex"), body(id="g"))
    reports: list[Progress] = []
    assert service.maintenance.reindex(reports.append) == 7
    assert reports[-1] == Progress(tenants_done=2, tenants=2, indexed=6, items=6)
    assert all(r.indexed <= r.items for r in reports)
    indexed = [r.indexed for r in reports]
    assert indexed == sorted(indexed)
