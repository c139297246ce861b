"""Search finds words across their forms (SPEC §6.2), through the product, on every backend:
German stems, folded accents, Japanese without spaces, possessives and hyphenated words."""

from __future__ import annotations

import pytest

from governed_memory.analysis import Analyzer
from governed_memory.crypto import Keyring
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from governed_memory.service.indexing import SearchSettings
from tests.support.fakes import FakeClock, body, principal, query

WRITER = principal()


def found(service: MemoryService, text: str, **search: object) -> list[str]:
    return [hit.item.id for hit in service.search(WRITER, query(text, **search)).items]


@pytest.fixture
def german(store: Store, keyring: Keyring, clock: FakeClock) -> MemoryService:
    """A service whose analyzer is German, over each backend."""
    return MemoryService(store, keyring, clock=clock, search=SearchSettings(Analyzer("german")))


def test_german_stemming_finds_the_singular_from_the_plural(german: MemoryService) -> None:
    """With the German analyzer, "Kunde" finds "Kunden", and "Rechnungen" finds "Rechnung"."""
    german.write(WRITER, body(id="k", content="Die Kunden bevorzugen Rückrufe am Abend."))
    german.write(WRITER, body(id="r", content="Die Rechnung kommt per Post."))
    assert found(german, "Kunde") == ["k"]
    assert found(german, "Rechnungen") == ["r"]
    assert found(german, "Wann ruft man den Kunden zurück?") == ["k"]  # question words dropped


def test_a_tenant_may_search_in_its_own_language(
    store: Store, keyring: Keyring, clock: FakeClock
) -> None:
    """Per-tenant languages: acme's index is German, globex's English, in one service."""
    settings = SearchSettings(Analyzer("english"), {"acme": Analyzer("german")})
    service = MemoryService(store, keyring, clock=clock, search=settings)
    globex = principal("globex")
    service.write(WRITER, body(id="de", content="Die Kunden zahlen monatlich."))
    service.write(globex, body(id="en", content="The customers pay monthly."))
    assert found(service, "Kunde") == ["de"]
    assert [h.item.id for h in service.search(globex, query("customer")).items] == ["en"]


def test_accents_are_folded(service: MemoryService) -> None:
    """Accents fold away: the query "zurich" finds "Zürich", and "Café" finds "cafe"."""
    service.write(WRITER, body(id="z", content="Moved to Zürich last spring."))
    service.write(WRITER, body(id="c", content="The cafe near the office."))
    assert found(service, "zurich") == ["z"]
    assert found(service, "Café") == ["c"]


def test_a_japanese_query_without_spaces_is_found(service: MemoryService) -> None:
    """電話 (telephone) finds 顧客は電話を好まない (the customer dislikes the telephone)."""
    service.write(WRITER, body(id="ja", content="顧客は電話を好まない"))
    service.write(WRITER, body(id="other", content="顧客はメールを好む"))
    assert found(service, "電話") == ["ja"]
    assert found(service, "電話が嫌い") == ["ja"]


def test_an_english_possessive_is_found_from_the_name(service: MemoryService) -> None:
    """A possessive meets its name: the query "Caroline" finds "Caroline's sister"."""
    service.write(WRITER, body(id="p", content="Caroline's sister lives in Boston."))
    service.write(WRITER, body(id="n", content="Melanie paints."))
    assert found(service, "Caroline") == ["p"]
    assert found(service, "Where does Caroline's sister live?") == ["p"]


def test_hyphenated_words_meet_their_joined_and_parted_forms(service: MemoryService) -> None:
    """Hyphens: "email" finds "e-mail", and "de-stress" finds "destress"."""
    service.write(WRITER, body(id="hyphen", content="Prefers e-mail."))
    service.write(WRITER, body(id="joined", content="Tries to destress on weekends."))
    assert sorted(found(service, "email")) == ["hyphen"]
    assert found(service, "de-stress") == ["joined"]
    assert found(service, "E-Mail") == ["hyphen"]


def test_a_query_of_stopwords_only_still_searches(service: MemoryService) -> None:
    """A query of stopwords only ("The Who") looks them up rather than nothing."""
    service.write(WRITER, body(id="band", content="Saw The Who in 1979."))
    service.write(WRITER, body(id="none", content="Likes jazz."))
    assert found(service, "The Who") == ["band"]


def test_numbers_are_kept(service: MemoryService) -> None:
    """A number in a query finds it in content."""
    service.write(WRITER, body(id="n", content="Locker 4711 is hers."))
    service.write(WRITER, body(id="m", content="Locker 12 is his."))
    assert found(service, "4711") == ["n"]
