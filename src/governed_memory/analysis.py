"""The text analyzer: how a text becomes search terms, the same at index and query time.

SPEC §6.2. One :class:`Analyzer` (a language and a version, nothing else) turns content
into the terms of its postings (:meth:`Analyzer.index_terms`) and a query into the terms
to look up (:meth:`Analyzer.query_terms`). Both walk the same steps, so a word of a
memory and the same word in a query always meet:

1. **Normalize**: NFKC, case-folded; typographic apostrophes (``’``) and hyphens (``‐``)
   become ``'`` and ``-``; a soft hyphen disappears.
2. **Fold accents**: the combining diacritical marks are dropped (``Zürich`` → ``zurich``),
   and only those: the voicing marks of kana and the vowel signs of Indic scripts are
   letters of their words, not accents, and stay.
3. **Split** into words — letters, digits and their marks, joined by single inner
   apostrophes or hyphens — and into runs of CJK characters, which have no spaces.
4. **Words**: a hyphenated word yields its parts and the parts joined (``e-mail`` →
   ``e``, ``mail``, ``email``), so ``de-stress``, ``destress`` and ``stress`` meet. In
   English an apostrophe stays in the word and the stemmer removes a possessive
   (``Caroline's`` → ``carolin``); other languages split at it (``l'homme`` → ``l``,
   ``homme``). Every word goes through the Snowball stemmer of the language
   (``Kunden`` and ``Kunde`` → ``kund``). Numbers are words and are kept.
5. **CJK runs** (Han, kana, Hangul) yield overlapping character bigrams, and at index time
   their single characters too; a query uses the bigrams of a run (its character when the
   run has one), so ``電話`` finds ``顧客は電話を好まない``.
6. **At query time only**, stopwords — Snowball's list for the language, which holds the
   question words (``what``, ``did``, ``where``, ``his``) — are dropped, unless nothing
   else is left. The index keeps them: in a conversation most turns are statements, so
   a question word is rare there, and looked up it would rank questions above answers.

A query keeps at most 32 distinct terms, in order of first appearance; no term is longer
than 64 characters. The analyzer keeps no cache of words (the stemmer's cache is off): a
cache would hold plaintext of content past a forget. The index stores keyed hashes of
these terms, never the terms.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Protocol

import Stemmer

__all__ = [
    "LANGUAGES",
    "MAX_QUERY_TERMS",
    "MAX_TERM_CHARS",
    "STOPWORD_LANGUAGES",
    "VERSIONS",
    "Analyzer",
]

MAX_QUERY_TERMS = 32
MAX_TERM_CHARS = 64
#: Analyzer versions: a new version changes some term of some text, and the index of a
#: tenant must then be rebuilt with it (terms of two versions must never be mixed).
VERSIONS = (1,)
#: Every language with a Snowball stemmer in PyStemmer (``porter`` is the original
#: English algorithm, ``dutch_porter`` the older Dutch one).
LANGUAGES = frozenset(Stemmer.algorithms())
#: The languages whose stopwords are shipped (``governed_memory/stopwords/*.txt``,
#: Snowball's own lists); the others drop no word at query time.
STOPWORD_LANGUAGES = frozenset(
    {
        "danish",
        "dutch",
        "english",
        "finnish",
        "french",
        "german",
        "hungarian",
        "indonesian",
        "irish",
        "italian",
        "norwegian",
        "portuguese",
        "russian",
        "sesotho",
        "spanish",
        "swedish",
    }
)
_STOPWORD_FILES = {"porter": "english", "dutch_porter": "dutch"}
#: Languages whose stemmer removes a possessive itself, so an apostrophe stays in a word.
_KEEPS_APOSTROPHE = frozenset({"english", "porter"})

# Han (with its iteration marks), hiragana, katakana and Hangul: scripts written without
# spaces between words (Korean has spaces, but between phrases of several words).
_CJK = (
    "\u1100-\u11ff\u3005-\u3007\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff"
    "\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\U00020000-\U0003134f"
)
_CJK_RUN = re.compile(f"([{_CJK}]+)")
_ASCII_WORD = re.compile(r"\w+(?:['-]\w+)*", re.ASCII)
# The combining marks that are accents on letters, not letters of their own.
_DIACRITICS = ((0x0300, 0x036F), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF), (0x20D0, 0x20FF))
_FOLD = {c: None for low, high in _DIACRITICS for c in range(low, high + 1)} | {
    0x00AD: None,  # soft hyphen: a line-break hint, not a character of the word
    0x2010: ord("-"),  # hyphen (NFKC maps the non-breaking hyphen to it)
    0x2018: ord("'"),
    0x2019: ord("'"),
    0x02BC: ord("'"),  # modifier letter apostrophe
}


@cache
def _word_pattern() -> re.Pattern[str]:
    """Words: runs of letters, digits and marks, joined by single ``'`` or ``-``.

    Python's ``\\w`` leaves out combining marks, which would cut Devanagari or Thai words
    at every vowel sign, so the marks are added (computed once, from this Python's
    Unicode tables).
    """
    marks: list[str] = []
    start = previous = -2
    for code in [*range(0x20000), *range(0xE0100, 0xE01F0)]:
        if unicodedata.category(chr(code)).startswith("M"):
            if code != previous + 1:
                if start >= 0:
                    marks.append(f"{chr(start)}-{chr(previous)}")
                start = code
            previous = code
    marks.append(f"{chr(start)}-{chr(previous)}")
    letter = f"[\\w{''.join(marks)}]"
    return re.compile(f"{letter}+(?:['-]{letter}+)*")


@cache
def _stopwords(language: str) -> frozenset[str]:
    """The language's stopwords, folded like text (``für`` → ``fur``)."""
    name = _STOPWORD_FILES.get(language, language)
    if name not in STOPWORD_LANGUAGES:
        return frozenset()
    text = resources.files("governed_memory").joinpath("stopwords", f"{name}.txt")
    lines = text.read_text(encoding="utf-8").splitlines()
    return frozenset(_fold(line) for line in lines if line and not line.startswith("#"))


class _Stemmer(Protocol):
    """What the analyzer uses of a PyStemmer stemmer (the package ships no types)."""

    def stemWords(self, words: Sequence[str]) -> list[str]: ...


_local = threading.local()


def _stemmer(language: str) -> _Stemmer:
    """This thread's stemmer for ``language``, with its word cache off.

    A stemmer object is not safe to share between threads, and its cache (10,000 words by
    default) would keep plaintext of content in memory past a forget.
    """
    stemmers: dict[str, _Stemmer] | None = getattr(_local, "stemmers", None)
    if stemmers is None:
        stemmers = _local.stemmers = {}
    stemmer = stemmers.get(language)
    if stemmer is None:
        stemmer = stemmers[language] = Stemmer.Stemmer(language, 0)
    return stemmer


def _fold(text: str) -> str:
    """NFKC, case-folded, accents dropped, apostrophes and hyphens made plain."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    if folded.isascii():
        return folded
    stripped = unicodedata.normalize("NFD", folded).translate(_FOLD)
    return unicodedata.normalize("NFC", stripped)


@dataclass(frozen=True, slots=True)
class _Pieces:
    """A text cut up: its words (unstemmed, folded) and its CJK runs."""

    words: list[str]
    runs: list[str]


def _pieces(text: str, keeps_apostrophe: bool) -> _Pieces:
    words: list[str] = []
    runs: list[str] = []
    folded = _fold(text)
    # Plain ASCII has no marks and no CJK: a simpler pattern, about three times faster.
    ascii_only = folded.isascii()
    tokens = (_ASCII_WORD if ascii_only else _word_pattern()).findall(folded)
    if ascii_only and "-" not in folded and "'" not in folded:
        return _Pieces(tokens, runs)  # each token is one word as it stands (most texts)
    for token in tokens:
        if token.isascii():
            _add_word(token, words, keeps_apostrophe)
            continue
        for index, part in enumerate(_CJK_RUN.split(token)):
            if index % 2:
                runs.append(part)
            elif part := part.strip("'-"):
                _add_word(part, words, keeps_apostrophe)
    return _Pieces(words, runs)


def _add_word(word: str, words: list[str], keeps_apostrophe: bool) -> None:
    """``word`` as the words it stands for: a hyphenated word's parts, then the joined."""
    if "-" in word:
        parts = [p for p in word.split("-") if p]
        for part in parts:
            _add_word(part, words, keeps_apostrophe)
        _add_word("".join(parts), words, keeps_apostrophe)
    elif "'" in word and not keeps_apostrophe:
        words.extend(p for p in word.split("'") if p)
    else:
        words.append(word)


def _bigrams(run: str) -> Iterator[str]:
    if len(run) == 1:
        yield run
    for i in range(len(run) - 1):
        yield run[i : i + 2]


@dataclass(frozen=True, slots=True)
class Analyzer:
    """Text to search terms for one language; one analyzer serves index and query alike.

    ``language`` is a Snowball stemmer's name (:data:`LANGUAGES`); ``version`` names the
    rules (:data:`VERSIONS`), so an index built with other rules can be detected.
    """

    language: str = "english"
    version: int = 1

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            known = ", ".join(sorted(LANGUAGES))
            raise ValueError(f"unknown analyzer language {self.language!r}; known: {known}")
        if self.version not in VERSIONS:
            raise ValueError(f"unknown analyzer version {self.version!r}; known: {VERSIONS}")

    def index_terms(self, text: str) -> Counter[str]:
        """The terms of a text to index, with their counts: every word, stopwords too."""
        pieces = _pieces(text, self.language in _KEEPS_APOSTROPHE)
        stems = _stemmer(self.language).stemWords(pieces.words)
        if stems and max(map(len, stems)) > MAX_TERM_CHARS:
            stems = [term for term in stems if len(term) <= MAX_TERM_CHARS]
        counts = Counter(stems)
        for run in pieces.runs:
            counts.update(_bigrams(run))
            if len(run) > 1:
                counts.update(run)
        return counts

    def query_terms(self, text: str) -> list[str]:
        """The distinct terms to look up, stopwords dropped unless they are all there is."""
        pieces = _pieces(text, self.language in _KEEPS_APOSTROPHE)
        stop = _stopwords(self.language)
        words = [w for w in pieces.words if w not in stop]
        if not words and not pieces.runs:
            words = pieces.words  # a query of stopwords only ("The Who") still looks them up
        terms = [t for t in _stemmer(self.language).stemWords(words) if len(t) <= MAX_TERM_CHARS]
        for run in pieces.runs:
            terms.extend(_bigrams(run))
        return list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]
