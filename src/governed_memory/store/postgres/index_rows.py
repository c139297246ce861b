"""The rows of the PostgreSQL search index a rebuild copies in: an item's document and
postings (a batch writes them in SQL: ``sql.WRITE_ITEM``, ``sql.DROP_INDEX``).

A posting is (scope, term, impact, item) (:mod:`governed_memory.store.impact`); the
document holds the item's length, confidence, last change, expiry and kind, its keyed term
ids and their frequencies, as two arrays in one order.
"""

from __future__ import annotations

from typing import Any

from governed_memory.core.model import ItemState
from governed_memory.records import IndexDoc
from governed_memory.store.impact import document_columns, impact_rows
from governed_memory.store.search_rows import StoredTerms


def document_row(rowid: int, scope: int, item: ItemState, index: IndexDoc) -> tuple[Any, ...]:
    """The ``search_docs`` row of a searchable item (in ``sql.COPY_DOCUMENTS`` order)."""
    terms = index.terms
    if isinstance(terms, StoredTerms):  # as read from a document: the same two arrays
        stored_terms, stored_tfs = terms.stored
        return (*document_columns(rowid, scope, item, index), stored_terms, stored_tfs)
    return (*document_columns(rowid, scope, item, index), list(terms), list(terms.values()))


def posting_rows(rowid: int, scope: int, index: IndexDoc) -> list[tuple[int, int, int, int]]:
    """The item's postings (in ``sql.COPY_POSTINGS`` order)."""
    return impact_rows(rowid, scope, index)


__all__ = ["document_row", "posting_rows"]
