"""The rows of the SQLite search index: an item's postings and document, written and removed.

Every writer of the index goes through here: a batch (:mod:`.batch`) with
:func:`write_index` and :func:`drop_index`, a rebuild (:mod:`.bulk`) with
:func:`document_row` and :func:`posting_rows`. A posting is (scope, term, impact, item)
(:mod:`governed_memory.store.impact`); the document holds the item's length, confidence,
last change, expiry and kind, and its keyed term ids with their frequencies.
"""

from __future__ import annotations

import logging
import sys
from array import array
from collections.abc import Iterable, Mapping
from itertools import groupby
from typing import TYPE_CHECKING, Any

from governed_memory.core.model import ItemState
from governed_memory.records import IndexDoc
from governed_memory.store.impact import document_columns, impact, impact_rows
from governed_memory.store.search_rows import StoredTerms, document_terms
from governed_memory.store.sqlite import sql

if TYPE_CHECKING:  # a checking worker imports this module, and no sqlite3 (checker.py)
    import sqlite3

log = logging.getLogger("governed_memory.store")

#: The migration that moved the index to impact-ordered postings (its documents' term
#: frequencies are filled from the old postings by :func:`fill_documents`).
IMPACT_MIGRATION = 9


def pack(terms: Mapping[int, int]) -> tuple[bytes, bytes]:
    """A document's term ids (64-bit) and their frequencies (16-bit), in one order (as
    they were read, for terms read from a document)."""
    if isinstance(terms, StoredTerms):
        packed_terms, packed_tfs = terms.stored
        return bytes(packed_terms), bytes(packed_tfs)
    return array("q", terms).tobytes(), array("H", terms.values()).tobytes()


def unpack(packed_terms: bytes, packed_tfs: bytes) -> dict[int, int] | None:
    """The term → frequency map of a document's two blobs; ``None`` if they do not hold
    a document's terms (damaged: see ``search_rows.UNREADABLE``)."""
    return document_terms(packed_terms, packed_tfs)


def needles(terms: Iterable[int]) -> dict[int, bytes]:
    """Each term's packed form, to find it in documents (:func:`frequencies_in`)."""
    return {term: array("q", [term]).tobytes() for term in terms}


def frequencies_in(
    packed_terms: bytes, packed_tfs: bytes, wanted: Mapping[int, bytes]
) -> dict[int, int] | None:
    """The frequencies of the ``wanted`` terms a document holds, found in its blobs
    without unpacking them (a search needs two or three of its terms, not all); ``None``
    if the two are not blobs of whole ids and as many frequencies (damaged: as for
    :func:`unpack`, the document cannot be read)."""
    if (
        type(packed_terms) is not bytes
        or type(packed_tfs) is not bytes
        or len(packed_terms) % 8
        or len(packed_tfs) * 4 != len(packed_terms)
    ):
        return None
    found: dict[int, int] = {}
    for term, needle in wanted.items():
        at = packed_terms.find(needle)
        while at % 8:  # a match straddling two ids: look further (-1 % 8 is 7)
            if at < 0:
                break
            at = packed_terms.find(needle, at + 1)
        if at >= 0:
            start = at // 4  # the 16-bit frequency at the same index as the 64-bit id
            found[term] = int.from_bytes(packed_tfs[start : start + 2], sys.byteorder)
    return found


def document_row(rowid: int, scope: int, item: ItemState, index: IndexDoc) -> tuple[Any, ...]:
    """The ``search_docs`` row of a searchable item (in :data:`sql.INSERT_DOCUMENT` order)."""
    return (*document_columns(rowid, scope, item, index), *pack(index.terms))


def posting_rows(rowid: int, scope: int, index: IndexDoc) -> list[tuple[int, int, int, int]]:
    """The item's postings (in :data:`sql.INSERT_POSTING` order)."""
    return impact_rows(rowid, scope, index)


def write_index(
    conn: sqlite3.Connection, rowid: int, scope: int, item: ItemState, index: IndexDoc
) -> None:
    """Index a searchable item: its postings, its document, its vector, its scope's totals.

    The one place a write adds an item to the index (its old rows, if any, are removed
    first by :func:`drop_index`).
    """
    conn.executemany(sql.INSERT_POSTING, posting_rows(rowid, scope, index))
    conn.execute(sql.INSERT_DOCUMENT, document_row(rowid, scope, item, index))
    if index.vector is not None:
        conn.execute(sql.INSERT_VECTOR, (rowid, scope, index.vector))
    conn.execute(sql.DOCUMENT_ADDED, (index.length, scope))


def drop_index(conn: sqlite3.Connection, rowid: int) -> None:
    """Remove an item's postings, document and vector, and its share of its scope's totals.

    The postings are deleted by their exact keys, recomputed from the document; if fewer
    go than the document has terms (document and postings disagree: drift, corruption),
    or the document's terms cannot be read at all, every posting of the item in its scope
    is deleted instead (a scan of the scope), so an erased item never leaves a posting
    behind and a damaged document never stops a write.
    """
    old = conn.execute(sql.OLD_DOCUMENT, (rowid,)).fetchone()
    if old is None:
        return
    scope, length, packed_terms, packed_tfs = old
    terms = unpack(packed_terms, packed_tfs)
    if terms is not None:
        deleted = conn.executemany(
            sql.DELETE_POSTING,
            [(scope, term, impact(tf, length), rowid) for term, tf in terms.items()],
        ).rowcount
    if terms is None or deleted != len(terms):
        stray = conn.execute(sql.DELETE_ITEM_POSTINGS, (scope, rowid)).rowcount
        log.warning(
            "search document %s; %d stray postings deleted by scan",
            "unreadable" if terms is None else "and postings disagreed",
            stray,
        )
    conn.execute(sql.DELETE_DOCUMENT, (rowid,))
    conn.execute(sql.DELETE_VECTOR, (rowid,))
    conn.execute(sql.DOCUMENT_REMOVED, (length, scope))


def fill_documents(conn: sqlite3.Connection) -> None:
    """Pack each migrated document's terms and frequencies from the old postings (inside
    the transaction of migration :data:`IMPACT_MIGRATION`, before they are dropped)."""
    rows: Iterable[tuple[int, int, int]] = conn.execute(
        "SELECT item, term, tf FROM postings ORDER BY item, term"
    )
    conn.executemany(
        "UPDATE search_docs_0009 SET terms = ?, tfs = ? WHERE item = ?",
        (
            (*pack({term: tf for _, term, tf in postings}), item)
            for item, postings in groupby(rows, key=lambda row: row[0])
        ),
    )


__all__ = [
    "IMPACT_MIGRATION",
    "document_row",
    "drop_index",
    "fill_documents",
    "frequencies_in",
    "needles",
    "pack",
    "posting_rows",
    "unpack",
    "write_index",
]
