"""A tenant's projection rows as a rebuild compares them with the fold of its log: read
once, in one snapshot, while the rebuild folds the tenant (the store's ``index_entries``)
and kept for its swap (:mod:`.bulk`), and by the workers that check tenants ahead of it
(:mod:`.checker`).

Apart from :mod:`.bulk` so that a checking worker, a process of its own, imports what it
reads with and not the store's write paths.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from governed_memory.codec import ITEM_COLUMNS
from governed_memory.records import IndexDoc, IndexedContent
from governed_memory.store.rebuild_diff import Posting, Stored
from governed_memory.store.search_rows import StoredTerms, warn_unreadable
from governed_memory.store.sqlite import sql

if TYPE_CHECKING:
    from governed_memory.store.sqlite.database import SQLiteDatabase


class Rows(Protocol):
    """What a statement run by a :class:`Reader` gives: its rows, as tuples."""

    def __iter__(self) -> Iterator[Any]: ...

    def fetchall(self) -> list[Any]: ...

    def fetchone(self) -> Any: ...


class Reader(Protocol):
    """A connection these rows are read on: the store's own (``sqlite3``) or a checking
    worker's (APSW, :mod:`.checker`)."""

    def execute(self, statement: str, bindings: Any = ..., /) -> Rows: ...


# Where a column of an item's row is in a REBUILD_ITEMS row after its row id.
_STATUS = ITEM_COLUMNS.index("status")
_CONTENT_VERSION = ITEM_COLUMNS.index("content_version")
_CONTENT_HASH = ITEM_COLUMNS.index("content_hash")


@dataclass
class Held:
    """A tenant's item and document rows read in one snapshot before its fold (its index
    entries are made from them), with what tells at its swap whether they are still its
    rows: the connection they were read on, that connection's ``PRAGMA data_version``
    in the snapshot (it changes once any other connection commits anything, this store's
    own writer included) and the tenant's last event then."""

    conn: Reader
    version: int
    through: int
    items: dict[str, tuple[int, tuple[Any, ...]]]
    documents: dict[int, tuple[Any, ...]]

    def entries(self) -> dict[str, IndexedContent]:
        """What ``Store.index_entries`` returns, from these rows: each active item's
        document, with the content version and hash of its row (none for a document
        whose terms cannot be read: see ``StoredTerms.read``)."""
        found: dict[str, IndexedContent] = {}
        documents = self.documents
        unreadable = 0
        for memory_id, (rowid, row) in self.items.items():
            document = documents.get(rowid)
            if document is None or row[_STATUS] != "active":
                continue
            stored = StoredTerms.read(document[7], document[8])
            if stored is None:  # unreadable: no entry, the item is indexed again
                unreadable += 1
                continue
            found[memory_id] = IndexedContent(
                int(row[_CONTENT_VERSION]),
                str(row[_CONTENT_HASH]),
                IndexDoc(stored, int(document[2])),
            )
        warn_unreadable(unreadable)
        return found


def held_rows(database: SQLiteDatabase, tenant_id: str, most: int) -> Held | None:
    """The tenant's item and document rows, read in one snapshot on this thread's reader;
    ``None`` (nothing read) if it has more than ``most`` items."""
    conn = database.reader()
    with database.snapshot():
        (items,) = conn.execute(sql.TENANT_ITEM_COUNT, (tenant_id,)).fetchone()
        if items > most:
            return None
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        through = head(conn, tenant_id)
        rows, documents = tenant_rows(conn, tenant_id)
    return Held(conn, int(version), through, rows, documents)


def tenant_rows(
    conn: Reader, tenant_id: str, items: str = sql.REBUILD_ITEMS
) -> tuple[dict[str, tuple[int, tuple[Any, ...]]], dict[int, tuple[Any, ...]]]:
    """The tenant's item rows by id, as (row id, row), and its document rows by item row
    id (none read when it has no items). ``items`` is the read of the item rows:
    :data:`sql.REBUILD_ITEMS_AS_STORED` leaves each content as the row stores it."""
    rows = {row[2]: (row[0], row[1:]) for row in conn.execute(items, (tenant_id,))}
    documents = (
        {row[0]: row for row in conn.execute(sql.REBUILD_DOCUMENTS, (tenant_id,))} if rows else {}
    )
    return rows, documents


def still_held(database: SQLiteDatabase, held: Held | None, through: int) -> Held | None:
    """``held`` if it still is what the tenant's rows hold (called under the write lock):
    read on this thread's reader, before the fold of the same log, and nothing committed
    by any connection since (so every row is as it was read)."""
    if held is None or held.through != through or held.conn is not database.reader():
        return None
    (version,) = held.conn.execute("PRAGMA data_version").fetchone()
    return held if int(version) == held.version else None


def head(conn: Reader, tenant_id: str) -> int:
    """The position of the tenant's last event (0: none)."""
    (last,) = conn.execute(sql.TENANT_HEAD, (tenant_id,)).fetchone()
    return int(last)


def stored_rows(
    conn: Reader, tenant_id: str, needed: list[tuple[str, str]], held: Held | None
) -> Stored:
    """What the tenant's rows hold (its items and documents ``held`` if given), its
    scopes created where its searchable items need one; an empty projection costs a few
    index lookups."""
    stored = Stored()
    for scope, agent, purpose, documents, length in conn.execute(sql.REBUILD_SCOPES, (tenant_id,)):
        stored.scopes[(agent, purpose)] = (scope, documents, length)
    existing = list(stored.scopes.values())
    for key in needed:
        if key not in stored.scopes:
            (scope,) = conn.execute(sql.NEW_SCOPE, (tenant_id, *key)).fetchone()
            stored.scopes[key] = (scope, 0, 0)
    if held is not None:
        stored.items, stored.documents = held.items, held.documents
    else:
        stored.items, stored.documents = tenant_rows(conn, tenant_id)
    ids = [scope for scope, _, _ in existing]  # a scope made just now holds nothing yet
    if ids:
        stored.packed = {
            scope: conn.execute(sql.PACKED_POSTINGS, (scope,)).fetchall() for scope in ids
        }
        stored.full = partial(_postings, conn, ids)
        stored.vectors = {
            item: (scope, vector)
            for item, scope, vector in conn.execute(sql.scopes_vectors(len(ids)), ids)
        }
    return stored


def _postings(conn: Reader, scopes: list[int]) -> list[Posting]:
    """Every posting of ``scopes``, as rows."""
    return conn.execute(sql.scopes_postings(len(scopes)), scopes).fetchall()


__all__ = [
    "Held",
    "Reader",
    "Rows",
    "head",
    "held_rows",
    "still_held",
    "stored_rows",
    "tenant_rows",
]
