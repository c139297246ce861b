"""What a rebuild writes: the difference between a tenant's stored projection rows and the
rows the fold of its log makes, shared by the SQLite and PostgreSQL stores.

A rebuild over an intact projection used to delete and insert every row (memories with
their indexes, documents, postings, vectors, scope totals); now each backend reads what
the tenant's rows hold (:class:`Stored`, inside the rebuild's write transaction) and
writes only the :class:`Diff`. The comparison is exact, row by row and column by column:
an item's ``memories`` row is compared with the row its folded state makes, its document
with the document its index entry and state make, the postings of the tenant's scopes as
a set with the postings the entries imply (so a missing, extra or altered posting is
found, whatever the documents say), vectors by their sealed bytes, and each scope's
document count and total length with the folded ones. An item keeps its row id, so its
unchanged postings stay where they are; a new item gets a fresh one. A tenant with no
rows yet (``gmem import``) is loaded whole, a chunk at a time, without comparing
(:func:`load`); so is a tenant of more than :data:`COMPARED_ITEMS` items, its rows
deleted first (:func:`compared`), since comparing holds all of its stored rows and its
folded postings at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from governed_memory.codec import item_row
from governed_memory.core.model import ItemState
from governed_memory.records import IndexDoc, ItemChange
from governed_memory.store.impact import impact_rows

_LENGTH_MASK = (1 << 16) - 1
_TF_SHIFT = 16  # a posting's impact is tf << 16 | (65535 - length): store/impact.py

ScopeKey = tuple[str, str]  # (agent, purpose) within a tenant
Posting = tuple[int, int, int, int]  # (scope, term, impact, item)
#: Items whose rows an empty projection's load builds and writes at once.
LOAD_CHUNK = 2_048
#: The most items a tenant may have for its rows to be compared: comparing holds every
#: stored row of the tenant and the set of its folded postings at once (about 8 KiB an
#: item), where deleting its rows and loading them again holds one chunk. A larger tenant
#: is rewritten whole, so a rebuild's peak memory stays what the fold itself needs.
COMPARED_ITEMS = 10_000
#: A backend's search_docs row of an item: (rowid, scope, item, index entry) -> the row.
DocumentRow = Callable[[int, int, ItemState, IndexDoc], tuple[Any, ...]]
#: A posting of a known scope as (term, impact << 31 | item): one tuple of two integers,
#: cheaper to read and compare than (scope, term, impact, item). Exact (one-to-one) while
#: 0 <= item < 2**31 and 0 <= impact < 2**32; a backend reads a posting outside those
#: ranges as (term, None), which no folded posting equals.
Packed = tuple[int, int | None]
#: The largest row id (exclusive) a packed posting holds.
PACKED_ITEMS = 1 << 31
_PACKED_SHIFT = 31


@dataclass
class Stored:
    """What the projection holds of one tenant: its items' rows by memory id (with their
    row ids), the documents of those items by row id, every posting and vector of its
    scopes, and its scopes by (agent, purpose) with their id, document count and total
    length."""

    items: dict[str, tuple[int, tuple[Any, ...]]] = field(default_factory=dict)
    documents: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    postings: list[Posting] = field(default_factory=list)
    vectors: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    scopes: dict[ScopeKey, tuple[int, int, int]] = field(default_factory=dict)
    #: A backend may give the postings packed instead, by scope (:data:`Packed`), with
    #: ``full`` to read them as :data:`Posting` rows should any of them differ.
    packed: dict[int, list[Packed]] | None = None
    full: Callable[[], list[Posting]] | None = None

    def empty(self) -> bool:
        """Whether the tenant has no projection rows (scopes aside): nothing to compare."""
        packed = self.packed is not None and any(self.packed.values())
        return not (self.items or self.documents or self.postings or packed or self.vectors)


@dataclass
class Diff:
    """The writes that make a tenant's stored rows the folded ones. Item rows are
    ``(rowid, *columns)``; ``totals`` are ``(documents, total_length, scope)`` of the
    scopes whose totals differ; ``touched`` the scopes whose postings changed (their
    cached statistics are stale)."""

    deleted_items: list[int] = field(default_factory=list)
    changed_items: list[tuple[Any, ...]] = field(default_factory=list)
    new_items: list[tuple[Any, ...]] = field(default_factory=list)
    deleted_documents: list[int] = field(default_factory=list)
    new_documents: list[tuple[Any, ...]] = field(default_factory=list)
    deleted_postings: list[Posting] = field(default_factory=list)
    new_postings: list[Posting] = field(default_factory=list)
    deleted_vectors: list[int] = field(default_factory=list)
    new_vectors: list[tuple[int, int, bytes]] = field(default_factory=list)
    totals: list[tuple[int, int, int]] = field(default_factory=list)
    touched: set[int] = field(default_factory=set)

    def nothing(self) -> bool:
        """Whether there is nothing to write: the stored rows are the folded ones."""
        return not any(getattr(self, name) for name in self.__dataclass_fields__)

    def extend(self, other: Diff) -> None:
        """Add another tenant's writes (several tenants share one transaction)."""
        for name in self.__dataclass_fields__:
            mine = getattr(self, name)
            if isinstance(mine, set):
                mine.update(getattr(other, name))
            else:
                mine.extend(getattr(other, name))


def compared(changes: Sequence[ItemChange]) -> bool:
    """Whether a tenant of these folded items is compared with its stored rows (else its
    rows are deleted and loaded whole)."""
    return len(changes) <= COMPARED_ITEMS


def needed_scopes(changes: Sequence[ItemChange]) -> list[ScopeKey]:
    """The (agent, purpose) scopes the tenant's searchable items are in, sorted."""
    return sorted({(c.item.agent_id, c.item.purpose) for c in changes if c.index is not None})


def diff(
    changes: Sequence[ItemChange],
    stored: Stored,
    allocate: Callable[[int], Sequence[int]],
    document_row: DocumentRow,
) -> Diff:
    """The writes that turn ``stored`` into the rows of ``changes`` (the tenant's folded
    items, each with its index entry when searchable). ``stored.scopes`` must hold every
    scope a searchable item is in; ``allocate(n)`` gives ``n`` fresh row ids."""
    out = Diff()
    scopes = {key: scope for key, (scope, _, _) in stored.scopes.items()}
    fresh_ids = allocate(sum(1 for c in changes if c.item.id not in stored.items))
    fresh = iter(fresh_ids)
    kept: set[int] = set()
    documents: dict[int, tuple[Any, ...]] = {}
    packed: dict[int, set[Packed]] | None = None
    if stored.packed is not None and max(fresh_ids, default=0) < PACKED_ITEMS:
        packed = {scope: set() for scope in scopes.values()}
    postings: set[Posting] = set()
    vectors: dict[int, tuple[int, bytes]] = {}
    totals = {scope: [0, 0] for scope in scopes.values()}
    searchable: list[tuple[int, int, IndexDoc]] = []
    for change in changes:
        item, index = change.item, change.index
        row = item_row(item)
        found = stored.items.get(item.id)
        if found is None:
            rowid = next(fresh)
            out.new_items.append((rowid, *row))
        else:
            rowid = found[0]
            kept.add(rowid)
            if found[1] != row:
                out.changed_items.append((rowid, *row))
        if index is None:
            continue
        scope = scopes[(item.agent_id, item.purpose)]
        documents[rowid] = document_row(rowid, scope, item, index)
        if packed is not None and rowid < PACKED_ITEMS:
            packed[scope].update(packed_rows(rowid, index))
            searchable.append((rowid, scope, index))
        else:
            packed = None
            postings.update(impact_rows(rowid, scope, index))
            for earlier, its_scope, entry in searchable:  # were packed: now as rows
                postings.update(impact_rows(earlier, its_scope, entry))
            searchable.clear()
        if index.vector is not None:
            vectors[rowid] = (scope, index.vector)
        total = totals[scope]
        total[0] += 1
        total[1] += index.length
    out.deleted_items = [rowid for rowid, _ in stored.items.values() if rowid not in kept]
    _documents(out, stored.documents, documents)
    if packed is not None and stored.packed is not None and stored.full is not None:
        if not _same_packed(stored.packed, packed):
            for rowid, scope, entry in searchable:
                postings.update(impact_rows(rowid, scope, entry))
            _postings(out, stored.full(), postings)
    else:
        _postings(out, stored.full() if stored.full is not None else stored.postings, postings)
    _vectors(out, stored.vectors, vectors)
    for scope, n, length in stored.scopes.values():
        count, total_length = totals[scope]
        if (count, total_length) != (n, length):
            out.totals.append((count, total_length, scope))
    return out


def load(
    changes: Sequence[ItemChange],
    stored: Stored,
    allocate: Callable[[int], Sequence[int]],
    document_row: DocumentRow,
) -> Iterator[Diff]:
    """The rows of ``changes`` for a tenant whose projection is :meth:`Stored.empty`
    (``gmem import``): every row is new, so nothing is compared; a chunk of
    ``LOAD_CHUNK`` items at a time (the rows of all of them are never held at once), then
    the scopes' totals."""
    scopes = {key: scope for key, (scope, _, _) in stored.scopes.items()}
    totals = {scope: [0, 0] for scope in scopes.values()}
    for start in range(0, len(changes), LOAD_CHUNK):
        chunk = changes[start : start + LOAD_CHUNK]
        out = Diff()
        for rowid, change in zip(allocate(len(chunk)), chunk, strict=True):
            item, index = change.item, change.index
            out.new_items.append((rowid, *item_row(item)))
            if index is None:
                continue
            scope = scopes[(item.agent_id, item.purpose)]
            out.new_documents.append(document_row(rowid, scope, item, index))
            out.new_postings.extend(impact_rows(rowid, scope, index))
            if index.vector is not None:
                out.new_vectors.append((rowid, scope, index.vector))
            totals[scope][0] += 1
            totals[scope][1] += index.length
        yield out
    out = Diff()
    for scope, n, length in stored.scopes.values():
        if (totals[scope][0], totals[scope][1]) != (n, length):
            out.totals.append((totals[scope][0], totals[scope][1], scope))
    yield out


def _documents(
    out: Diff, stored: Mapping[int, tuple[Any, ...]], wanted: Mapping[int, tuple[Any, ...]]
) -> None:
    for rowid, row in stored.items():
        if wanted.get(rowid) != row:
            out.deleted_documents.append(rowid)
            out.touched.add(row[1])
    for rowid, row in wanted.items():
        if stored.get(rowid) != row:
            out.new_documents.append(row)
            out.touched.add(row[1])


def packed_rows(rowid: int, index: IndexDoc) -> list[Packed]:
    """An item's postings as :data:`Packed` (``rowid`` below :data:`PACKED_ITEMS`)."""
    length = index.length
    if not 0 <= length <= _LENGTH_MASK:  # as impact_rows: every tf is at most the length
        raise ValueError(f"an item's length {length} is out of range")
    low = ((_LENGTH_MASK - length) << _PACKED_SHIFT) | rowid
    shift = _TF_SHIFT + _PACKED_SHIFT
    terms = index.terms
    return list(zip(terms, [(tf << shift) | low for tf in terms.values()], strict=True))


def _same_packed(stored: Mapping[int, list[Packed]], wanted: Mapping[int, set[Packed]]) -> bool:
    """Whether each scope holds exactly the wanted postings (a scope's rows are unique:
    its primary key), so as many as are wanted, all of them wanted, is the same set."""
    for scope, rows in stored.items():
        expected = wanted.get(scope, set())
        if len(rows) != len(expected) or not expected.issuperset(rows):
            return False
    return all(not rows or scope in stored for scope, rows in wanted.items())


def _postings(out: Diff, stored: list[Posting], wanted: set[Posting]) -> None:
    """The postings to delete and to add. ``stored`` holds no posting twice (the primary
    key), so as many as are wanted, all of them wanted, means the very same set."""
    if len(stored) == len(wanted) and wanted.issuperset(stored):
        return
    held = set(stored)
    out.deleted_postings = sorted(held - wanted)
    out.new_postings = sorted(wanted - held)
    out.touched.update(posting[0] for posting in out.deleted_postings)
    out.touched.update(posting[0] for posting in out.new_postings)


def _vectors(
    out: Diff,
    stored: Mapping[int, tuple[int, bytes]],
    wanted: Mapping[int, tuple[int, bytes]],
) -> None:
    for rowid, vector in stored.items():
        if wanted.get(rowid) != vector:
            out.deleted_vectors.append(rowid)
    for rowid, vector in wanted.items():
        if stored.get(rowid) != vector:
            out.new_vectors.append((rowid, *vector))


__all__ = [
    "LOAD_CHUNK",
    "PACKED_ITEMS",
    "Diff",
    "Packed",
    "Stored",
    "diff",
    "load",
    "needed_scopes",
    "packed_rows",
]
