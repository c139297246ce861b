"""A tenant's search rows as ``gmem replay --verify`` compares them, read once for SQLite
and PostgreSQL (the tables and columns are the same; only the placeholder and the form of
a document's terms differ: SQLite packs them into a blob, PostgreSQL keeps an array).

A row is attributed to its item through the item's row id, and to the tenant through its
scope; a row whose item is missing or of another tenant is reported under ``#`` and its
row id, so verify can name it.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from governed_memory.records import IndexDoc, IndexedContent, SearchRows

if TYPE_CHECKING:
    from governed_memory.store.sql_reads import Database

log = logging.getLogger("governed_memory.store")

_ITEM = "LEFT JOIN memories AS m ON m.rowid = r.item AND m.tenant_id = s.tenant_id"
_SCOPE = "JOIN scopes AS s ON s.id = r.scope"

# A posting's tf is the high bits of its impact (store/impact.py).
POSTINGS = (
    f"SELECT m.id, r.item, s.agent_id, s.purpose, r.term, r.impact >> 16 FROM postings AS r "
    f"{_SCOPE} "
    f"{_ITEM} WHERE s.tenant_id = {{P}}"
)
DOCUMENTS = (
    f"SELECT m.id, r.item, s.agent_id, s.purpose, r.length, r.terms, r.tfs FROM search_docs AS r "
    f"{_SCOPE} {_ITEM} WHERE s.tenant_id = {{P}}"
)
VECTORS = (
    f"SELECT m.id, r.item, s.agent_id, s.purpose FROM search_vectors AS r {_SCOPE} {_ITEM} "
    f"WHERE s.tenant_id = {{P}}"
)


# What the index holds of each active item, with the content it was made of.
ENTRIES = (
    "SELECT m.id, m.content_version, m.content_hash, d.length, d.terms, d.tfs "
    "FROM memories AS m JOIN search_docs AS d ON d.item = m.rowid "
    "WHERE m.tenant_id = {P} AND m.status = 'active'"
)


class StoredTerms(dict[int, int]):
    """A document's terms and frequencies read from the index, with the two columns they
    were read from (``stored``: packed blobs on SQLite, arrays on PostgreSQL), so that a
    rebuild keeping the entry writes or compares those columns without encoding them
    again. Never changed once read."""

    __slots__ = ("stored",)

    def __init__(self, terms: Iterable[tuple[int, int]], stored: tuple[Any, Any]) -> None:
        super().__init__(terms)
        self.stored = stored

    @classmethod
    def read(cls, terms: Any, tfs: Any) -> StoredTerms | None:
        """The terms of a document's two columns as read (see :func:`document_terms`),
        unpacked straight into the mapping; ``None`` if the columns do not hold a
        document's terms (damaged), so that the entry counts as absent and a rebuild
        indexes the item again from its content instead of failing."""
        try:
            return cls(_pairs(terms, tfs), (terms, tfs))
        except UNREADABLE:
            return None


def index_entries(
    database: Database, placeholder: str, tenant_id: str
) -> dict[str, IndexedContent]:
    """Each active item's index entry of the tenant, by memory id (see ``Store``)."""
    rows = database.query(ENTRIES.replace("{P}", placeholder), (tenant_id,))
    found: dict[str, IndexedContent] = {}
    unreadable = 0
    for memory_id, version, content_hash, length, terms, tfs in rows:
        stored = StoredTerms.read(terms, tfs)
        if stored is None:  # no entry: the item is indexed again
            unreadable += 1
            continue
        found[memory_id] = IndexedContent(
            int(version), str(content_hash), IndexDoc(stored, int(length))
        )
    warn_unreadable(unreadable)
    return found


def warn_unreadable(count: int) -> None:
    """Say (without content) that a tenant's index entries left out ``count`` documents
    whose terms could not be read, if any: damage behind the service's back, or a read
    of the wrong columns, which must not pass as a quiet re-index."""
    if count:
        log.warning(
            "rebuild: a tenant's search documents could not be read (%d); "
            "their items are indexed again from their content",
            count,
        )


def search_rows(database: Database, placeholder: str, tenant_id: str) -> dict[str, SearchRows]:
    """Every search row of the tenant's scopes, by the memory id of its item."""
    found: dict[str, SearchRows] = {}

    def rows_of(statement: str) -> list[Any]:
        return database.query(statement.replace("{P}", placeholder), (tenant_id,))

    for memory_id, rowid, agent, purpose, term, tf in rows_of(POSTINGS):
        rows = _entry(found, memory_id, rowid, agent, purpose)
        rows.postings[int(term)] = rows.postings.get(int(term), 0) + int(tf)
    for memory_id, rowid, agent, purpose, length, terms, tfs in rows_of(DOCUMENTS):
        rows = _entry(found, memory_id, rowid, agent, purpose)
        rows.length = int(length)
        rows.terms = document_terms(terms, tfs)
    for memory_id, rowid, agent, purpose in rows_of(VECTORS):
        _entry(found, memory_id, rowid, agent, purpose).vector = True
    return found


def _entry(
    found: dict[str, SearchRows], memory_id: str | None, rowid: int, agent: str, purpose: str
) -> SearchRows:
    rows = found.setdefault(memory_id if memory_id is not None else f"#{rowid}", SearchRows())
    rows.scopes.add((agent, purpose))
    return rows


#: What reading a document's two columns raises when they do not hold its terms: a blob
#: that is not whole integers, a count of terms other than of frequencies, a NULL column
#: or element. Such a document is treated as unreadable, never as a reason to fail.
UNREADABLE = (ValueError, TypeError)
#: The forms a blob column is read in (SQLite).
_PACKED = (bytes, memoryview)


def document_terms(terms: Any, tfs: Any) -> dict[int, int] | None:
    """A document's terms and their frequencies: packed blobs of 64-bit and 16-bit
    integers (SQLite), or two arrays (PostgreSQL); ``None`` if the columns do not hold a
    document's terms (see :data:`UNREADABLE`)."""
    try:
        return dict(_pairs(terms, tfs))
    except UNREADABLE:
        return None


def _pairs(
    terms: bytes | memoryview | list[int], tfs: bytes | memoryview | list[int]
) -> Iterator[tuple[int, int]]:
    """(term, frequency) of each of a document's terms, as :func:`document_terms` reads
    them (raising one of :data:`UNREADABLE` while iterated, or at once: ``ValueError`` for
    columns that are not two blobs nor two arrays, ``bytes(16)`` being sixteen zeros)."""
    if isinstance(terms, _PACKED) and isinstance(tfs, _PACKED):
        return zip(array("q", bytes(terms)), array("H", bytes(tfs)), strict=True)
    if isinstance(terms, list) and isinstance(tfs, list):
        return zip(map(int, terms), map(int, tfs), strict=True)
    raise ValueError("a document's terms are not two blobs nor two arrays")


__all__ = [
    "UNREADABLE",
    "StoredTerms",
    "document_terms",
    "index_entries",
    "search_rows",
    "warn_unreadable",
]
