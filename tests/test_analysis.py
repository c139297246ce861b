"""The analyzer (SPEC §6.2): one set of rules turns content and queries into search terms."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_memory.analysis import (
    LANGUAGES,
    MAX_QUERY_TERMS,
    MAX_TERM_CHARS,
    STOPWORD_LANGUAGES,
    Analyzer,
)

ENGLISH = Analyzer()
GERMAN = Analyzer("german")


def finds(analyzer: Analyzer, query: str, content: str) -> bool:
    """Whether a search for ``query`` would match ``content``: a query term among its terms."""
    return bool(set(analyzer.query_terms(query)) & set(analyzer.index_terms(content)))


def test_german_inflections_meet_at_one_stem() -> None:
    """German is stemmed with its own rules: "Kunden" and "Kunde" are one term."""
    assert GERMAN.query_terms("Kunde") == GERMAN.query_terms("Kunden")
    assert finds(GERMAN, "Welcher Kunde?", "Die Kunden bevorzugen E-Mail.")


def test_english_inflections_meet_at_one_stem() -> None:
    """English is stemmed with Snowball's English rules: "painted" finds "painting"."""
    assert finds(ENGLISH, "What has Melanie painted?", "Melanie: I love painting sunsets")


def test_accents_are_folded() -> None:
    """A word with accents and the same word without them are one term: zurich, Zürich."""
    assert ENGLISH.query_terms("zurich") == ENGLISH.query_terms("Zürich")
    assert finds(GERMAN, "Zurich", "Wir wohnen in Zürich.")
    assert finds(ENGLISH, "cafe resume", "A café résumé")


def test_kana_voicing_marks_are_not_accents() -> None:
    """Folding leaves the voicing marks of kana alone: "が" and "か" stay different."""
    assert ENGLISH.index_terms("が") != ENGLISH.index_terms("か")


def test_marks_of_indic_scripts_stay_inside_their_word() -> None:
    """A Devanagari word with vowel signs is one term, not cut at every sign."""
    assert list(ENGLISH.index_terms("नमस्ते")) == ["नमस्ते"]


def test_a_japanese_query_without_spaces_finds_its_memory() -> None:
    """CJK text is cut into character bigrams: "電話" finds "顧客は電話を好まない"."""
    assert finds(ENGLISH, "電話", "顧客は電話を好まない")
    assert finds(ENGLISH, "顧客は電話が嫌い", "顧客は電話を好まない")
    assert not finds(ENGLISH, "メール", "顧客は電話を好まない")


def test_a_single_cjk_character_finds_a_longer_run() -> None:
    """Single characters are indexed too, so a one-character query finds its word."""
    assert finds(ENGLISH, "猫", "猫が好きです")


def test_cjk_and_latin_in_one_word_are_split() -> None:
    """A Latin word glued to CJK text is a word of its own: "iPhone電話" has "iphon"."""
    terms = ENGLISH.index_terms("iPhone電話")
    assert {"iphon", "電話"} <= set(terms)


def test_an_english_possessive_is_the_name() -> None:
    """ "Caroline's" (with a straight or a curly apostrophe) is the term of "Caroline"."""
    assert ENGLISH.query_terms("Caroline's") == ENGLISH.query_terms("Caroline")
    assert ENGLISH.query_terms("Caroline’s") == ENGLISH.query_terms("Caroline")
    assert finds(ENGLISH, "What is Caroline's job?", "Caroline: I work as a counselor")


def test_other_languages_split_at_an_apostrophe() -> None:
    """Outside English an apostrophe separates words: French "l'homme" holds "homme"."""
    french = Analyzer("french")
    assert finds(french, "homme", "l'homme")


def test_a_hyphenated_word_yields_its_parts_and_the_joined_word() -> None:
    """ "de-stress" meets "destress" and "stress"; "e-mail" and "email" meet both ways."""
    assert finds(ENGLISH, "destress", "How do you de-stress?")
    assert finds(ENGLISH, "stress", "How do you de-stress?")
    assert finds(ENGLISH, "de-stress", "I destress by running")
    assert finds(ENGLISH, "email", "Send an e-mail")
    assert finds(ENGLISH, "e-mail", "Send an email")


def test_numbers_are_kept() -> None:
    """Numbers are terms like words: years, counts and codes are searchable."""
    assert finds(ENGLISH, "What happened in 2022?", "Melanie: I painted that lake sunrise in 2022")
    assert "7" in ENGLISH.query_terms("7 kids")
    assert "101" in ENGLISH.index_terms("room 101")


def test_question_words_are_dropped_at_query_time_only() -> None:
    """Stopwords and question words leave the query but stay in the index."""
    text = "When did Caroline go to the LGBTQ support group?"
    query = ENGLISH.query_terms(text)
    assert query == ["carolin", "go", "lgbtq", "support", "group"]
    assert {"when", "did", "the", "to"} <= set(ENGLISH.index_terms(text))


def test_a_query_of_stopwords_only_keeps_them() -> None:
    """A query with nothing but stopwords ("The Who") looks them up rather than nothing."""
    assert ENGLISH.query_terms("The Who") == ["the", "who"]


def test_german_stopwords_are_dropped_from_queries() -> None:
    """German questions lose German question words and articles."""
    assert GERMAN.query_terms("Wo wohnt der Kunde?") == ["wohnt", "kund"]


def test_a_query_is_distinct_ordered_and_bounded() -> None:
    """At most 32 distinct terms in order of first appearance, none over 64 characters."""
    words = [f"word{n}" for n in range(40)]
    query = ENGLISH.query_terms(" ".join(["word0", *words, "x" * 65]))
    assert query == [f"word{n}" for n in range(MAX_QUERY_TERMS)]
    assert "x" * 65 not in ENGLISH.index_terms("x" * 65)
    assert all(len(t) <= MAX_TERM_CHARS for t in ENGLISH.index_terms("y" * 64 + " z"))


def test_unknown_language_or_version_is_refused() -> None:
    """Only a language with a Snowball stemmer and a known version make an analyzer."""
    with pytest.raises(ValueError, match="klingon"):
        Analyzer("klingon")
    with pytest.raises(ValueError, match="version"):
        Analyzer("english", 99)


def test_every_shipped_stopword_list_belongs_to_a_stemmer() -> None:
    """Each stopword list is for a supported language, loads, and drops its own words."""
    assert STOPWORD_LANGUAGES <= LANGUAGES
    assert {"english", "german"} <= STOPWORD_LANGUAGES
    for language in sorted(STOPWORD_LANGUAGES):
        analyzer = Analyzer(language)
        assert analyzer.query_terms("zzzq") == ["zzzq"], language


def test_threads_analyze_alike() -> None:
    """Analyzers used from many threads at once give the terms one thread gives."""
    texts = [f"Caroline's {n} paintings of Zürich, e-mailed in 2023" for n in range(200)]
    expected = [ENGLISH.index_terms(t) for t in texts]
    results: list[list[object]] = []

    def work() -> None:
        results.append([ENGLISH.index_terms(t) for t in texts])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 4


texts = st.text(
    st.characters(categories=("L", "M", "N", "P", "Zs"), exclude_characters="\x00"),
    max_size=80,
)


@given(texts, st.sampled_from(["english", "german", "french", "russian", "porter"]))
def test_every_query_term_of_a_text_is_among_its_index_terms(text: str, language: str) -> None:
    """A text searched for with its own words always finds itself."""
    analyzer = Analyzer(language)
    assert set(analyzer.query_terms(text)) <= set(analyzer.index_terms(text))


@given(st.lists(texts, max_size=6))
def test_a_text_is_found_by_each_of_its_words(words: list[str]) -> None:
    """Every query term of a piece of a text is among the index terms of the whole text."""
    whole = ENGLISH.index_terms(" ".join(words))
    for word in words:
        assert set(ENGLISH.query_terms(word)) <= set(whole)


@given(texts)
def test_analysis_is_deterministic(text: str) -> None:
    """The same text gives the same terms, from a fresh analyzer of the same settings too."""
    assert ENGLISH.index_terms(text) == Analyzer("english", 1).index_terms(text)
    assert ENGLISH.query_terms(text) == ENGLISH.query_terms(text)
