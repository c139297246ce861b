"""A search document's terms as the index stores them (SQLite: two packed blobs;
PostgreSQL: two arrays), read back: what was written reads back exactly, and whatever
else the two columns hold (damage behind the service's back) is read or refused as
unreadable (``None``), never an exception, by every reader alike."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from governed_memory.store.search_rows import StoredTerms, document_terms
from governed_memory.store.sqlite.index_rows import frequencies_in, needles, pack, unpack

TERM = st.integers(min_value=-(2**63), max_value=2**63 - 1)  # a keyed 64-bit term id
TF = st.integers(min_value=0, max_value=2**16 - 1)
DOCUMENT = st.dictionaries(TERM, TF, max_size=40)
#: What a column may hold when something other than the service wrote it.
ANYTHING = st.one_of(
    st.binary(max_size=80),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=20),
    st.none(),
    st.floats(allow_nan=False),
    st.lists(st.one_of(st.none(), TERM), max_size=6),
)


@given(DOCUMENT, st.lists(TERM, max_size=4))
def test_a_packed_document_reads_back_exactly_by_every_reader(
    terms: dict[int, int], wanted: list[int]
) -> None:
    packed_terms, packed_tfs = pack(terms)
    assert document_terms(packed_terms, packed_tfs) == terms
    assert unpack(packed_terms, packed_tfs) == terms
    assert StoredTerms.read(packed_terms, packed_tfs) == terms
    assert document_terms(list(terms), list(terms.values())) == terms  # PostgreSQL's arrays
    found = frequencies_in(packed_terms, packed_tfs, needles(wanted))
    assert found == {term: terms[term] for term in wanted if term in terms}


@given(st.binary(max_size=96), st.binary(max_size=48), st.lists(TERM, max_size=3))
def test_any_two_blobs_are_read_whole_or_refused_alike(
    packed_terms: bytes, packed_tfs: bytes, wanted: list[int]
) -> None:
    """Two blobs are a document's terms only if the first holds whole 64-bit ids and the
    second as many 16-bit frequencies; every reader agrees on which."""
    whole = len(packed_terms) % 8 == 0 and len(packed_tfs) * 4 == len(packed_terms)
    read = document_terms(packed_terms, packed_tfs)
    assert (read is not None) == whole
    assert unpack(packed_terms, packed_tfs) == read
    assert (StoredTerms.read(packed_terms, packed_tfs) is not None) == whole
    found = frequencies_in(packed_terms, packed_tfs, needles(wanted))
    assert (found is not None) == whole
    if read is not None and found is not None and len(read) == len(packed_terms) // 8:
        assert found == {term: read[term] for term in wanted if term in read}


@given(ANYTHING, ANYTHING)
def test_whatever_else_the_columns_hold_is_refused_not_raised(terms: Any, tfs: Any) -> None:
    """Anything but two blobs or two arrays of integers is unreadable: an integer is not
    read as that many zero bytes, nor text as its characters, nor a NULL as nothing."""
    read = document_terms(terms, tfs)
    blobs = isinstance(terms, bytes) and isinstance(tfs, bytes)
    arrays = (
        isinstance(terms, list)
        and isinstance(tfs, list)
        and None not in terms
        and None not in tfs
        and len(terms) == len(tfs)
    )
    if not (blobs or arrays):
        assert read is None
        assert StoredTerms.read(terms, tfs) is None
        assert frequencies_in(terms, tfs, needles([0])) is None
