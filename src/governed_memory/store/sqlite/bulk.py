"""Bulk paths of the SQLite store: importing a log, rebuilding a tenant's projection.

Both run in one write transaction of their own (outside group commit) and write with a few
``executemany`` statements rather than a few statements per item; a rebuild writes only
the rows that differ from the fold of the log.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from itertools import count, islice
from typing import Any

from governed_memory.codec import ITEM_COLUMNS, idempotency_result, stored_columns
from governed_memory.core.events import StoredEvent
from governed_memory.records import (
    IdempotencyRecord,
    IndexDoc,
    IndexedContent,
    ItemKey,
    TenantRebuild,
)
from governed_memory.store.chain_links import Heads
from governed_memory.store.paging import require_ascending
from governed_memory.store.rebuild_diff import (
    Diff,
    Posting,
    Stored,
    compared,
    diff,
    load,
    needed_scopes,
)
from governed_memory.store.search_rows import StoredTerms
from governed_memory.store.sqlite import sql
from governed_memory.store.sqlite.batch import head_hash
from governed_memory.store.sqlite.database import SQLiteDatabase
from governed_memory.store.sqlite.index_rows import document_row

ScopeKey = tuple[str, str, str]
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

    conn: sqlite3.Connection
    version: int
    through: int
    items: dict[str, tuple[int, tuple[Any, ...]]]
    documents: dict[int, tuple[Any, ...]]

    def entries(self) -> dict[str, IndexedContent]:
        """What ``Store.index_entries`` returns, from these rows: each active item's
        document, with the content version and hash of its row."""
        found: dict[str, IndexedContent] = {}
        documents = self.documents
        for memory_id, (rowid, row) in self.items.items():
            document = documents.get(rowid)
            if document is None or row[_STATUS] != "active":
                continue
            terms, tfs = document[7], document[8]
            found[memory_id] = IndexedContent(
                int(row[_CONTENT_VERSION]),
                str(row[_CONTENT_HASH]),
                IndexDoc(StoredTerms.read(terms, tfs), int(document[2])),
            )
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
        through = _head(conn, tenant_id)
        rows, documents = tenant_rows(conn, tenant_id)
    return Held(conn, int(version), through, rows, documents)


def tenant_rows(
    conn: sqlite3.Connection, tenant_id: str, items: str = sql.REBUILD_ITEMS
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


def import_events(database: SQLiteDatabase, events: Sequence[StoredEvent]) -> None:
    """Append ``events`` with their own positions, each above the log's head, atomically."""
    with database.write_transaction() as conn:
        (head,) = conn.execute(sql.HEAD).fetchone()
        require_ascending(events, head)
        heads = Heads(partial(head_hash, conn))
        for stored in events:
            columns, stored_row = stored_columns(stored.event)
            links = heads.link(stored.event.tenant_id, columns)
            conn.execute(sql.IMPORT_EVENT, (stored.position, *stored_row, *links))


def import_item_keys(database: SQLiteDatabase, keys: Sequence[ItemKey]) -> None:
    """Store imported item keys in one transaction (a duplicate refuses them all)."""
    with database.write_transaction() as conn:
        conn.executemany(
            sql.INSERT_ITEM_KEY,
            [(k.tenant_id, k.memory_id, k.subject_id, k.key_id, k.wrapped) for k in keys],
        )


def import_idempotency(database: SQLiteDatabase, records: Sequence[IdempotencyRecord]) -> None:
    """Store imported idempotency records in one transaction (a duplicate refuses them
    all)."""
    with database.write_transaction() as conn:
        conn.executemany(
            sql.INSERT_IDEMPOTENCY,
            [
                (r.tenant_id, r.credential, r.key, r.fingerprint, idempotency_result(r), r.position)
                for r in records
            ],
        )


def rebuild(
    database: SQLiteDatabase,
    tenants: Sequence[TenantRebuild],
    held: dict[str, Held] | None = None,
) -> tuple[set[str], dict[ScopeKey, int]]:
    """Make the rows of several tenants the folded ones, in one transaction, writing only
    what differs from what they hold (:mod:`governed_memory.store.rebuild_diff`): over an
    intact projection that is nothing, over an empty one every row. A tenant too large to
    compare is deleted and loaded whole. A tenant's item and document rows are taken from
    ``held`` (read before its fold: :func:`held_rows`) when nothing was committed since
    (:func:`still_held`), else read here.

    A tenant whose last event is no longer at its ``through`` is left as it is. Returns
    those tenants, and the ids of the other tenants' scopes, committed.
    """
    held = held or {}
    with database.write_transaction(deferred=True) as conn:
        # The write transaction holds the write lock: no event can land until this
        # rebuild commits, so the checks and reads below cannot be overtaken.
        moved = {t.tenant_id for t in tenants if _head(conn, t.tenant_id) != t.through}
        (top,) = conn.execute(sql.TOP_ROWID).fetchone()
        fresh = count(top + 1)  # ids above every row's, before any is deleted

        def allocate(n: int) -> list[int]:
            return list(islice(fresh, n))

        writes = Diff()
        scopes: dict[ScopeKey, int] = {}
        for tenant in tenants:
            if tenant.tenant_id in moved:
                continue
            kept = still_held(database, held.get(tenant.tenant_id), tenant.through)
            if not compared(tenant.changes):
                kept = None
                for statement in sql.CLEAR_TENANT:
                    conn.execute(statement, (tenant.tenant_id,))
            stored = stored_rows(conn, tenant.tenant_id, needed_scopes(tenant.changes), kept)
            if stored.empty():
                for rows in load(tenant.changes, stored, allocate, document_row):
                    _write(conn, rows)
            else:
                writes.extend(diff(tenant.changes, stored, allocate, document_row))
            for (agent, purpose), (scope, _, _) in stored.scopes.items():
                scopes[(tenant.tenant_id, agent, purpose)] = scope
        _write(conn, writes)
    return moved, scopes


def _head(conn: sqlite3.Connection, tenant_id: str) -> int:
    """The position of the tenant's last event (0: none)."""
    (last,) = conn.execute(sql.TENANT_HEAD, (tenant_id,)).fetchone()
    return int(last)


def stored_rows(
    conn: sqlite3.Connection, tenant_id: str, needed: list[tuple[str, str]], held: Held | None
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


def _postings(conn: sqlite3.Connection, scopes: list[int]) -> list[Posting]:
    """Every posting of ``scopes``, as rows."""
    return conn.execute(sql.scopes_postings(len(scopes)), scopes).fetchall()


def _write(conn: sqlite3.Connection, writes: Diff) -> None:
    """Apply a diff: what goes first, then what changes, then what comes."""
    conn.executemany(sql.DELETE_VECTOR, [(rowid,) for rowid in writes.deleted_vectors])
    conn.executemany(sql.DELETE_DOCUMENT, [(rowid,) for rowid in writes.deleted_documents])
    conn.executemany(sql.DELETE_POSTING, sorted(writes.deleted_postings))
    conn.executemany(sql.DELETE_ITEM, [(rowid,) for rowid in writes.deleted_items])
    conn.executemany(sql.REWRITE_ITEM, [(*row[1:], row[0]) for row in writes.changed_items])
    conn.executemany(sql.LOAD_ITEM, writes.new_items)
    conn.executemany(sql.INSERT_DOCUMENT, writes.new_documents)
    writes.new_postings.sort()  # in key order: each B-tree page is visited once
    conn.executemany(sql.INSERT_POSTING, writes.new_postings)
    conn.executemany(sql.LOAD_VECTOR, writes.new_vectors)
    conn.executemany(sql.SCOPE_TOTALS, writes.totals)
    totalled = {scope for _, _, scope in writes.totals}
    conn.executemany(sql.SCOPE_CHANGED, [(scope,) for scope in sorted(writes.touched - totalled)])


__all__ = [
    "Held",
    "held_rows",
    "import_events",
    "import_idempotency",
    "import_item_keys",
    "rebuild",
    "still_held",
    "stored_rows",
    "tenant_rows",
]
