"""Bulk paths of the SQLite store: importing a log, rebuilding a tenant's projection.

Both run in one write transaction of their own (outside group commit) and write with a few
``executemany`` statements rather than a few statements per item.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from governed_memory.codec import idempotency_result, item_row
from governed_memory.core.events import StoredEvent
from governed_memory.errors import LogMoved
from governed_memory.records import IdempotencyRecord, ItemChange, ItemKey
from governed_memory.store.chain_links import Heads, event_columns
from governed_memory.store.paging import require_ascending
from governed_memory.store.sqlite import sql
from governed_memory.store.sqlite.batch import head_hash
from governed_memory.store.sqlite.database import SQLiteDatabase
from governed_memory.store.sqlite.index_rows import document_row, posting_rows

ScopeKey = tuple[str, str, str]
#: Items whose rows a rebuild builds and inserts at once.
LOAD_CHUNK = 2_048


def import_events(database: SQLiteDatabase, events: Sequence[StoredEvent]) -> None:
    """Append ``events`` with their own positions, each above the log's head, atomically."""
    with database.write_transaction() as conn:
        (head,) = conn.execute(sql.HEAD).fetchone()
        require_ascending(events, head)
        heads = Heads(partial(head_hash, conn))
        for stored in events:
            columns = event_columns(stored.event)
            links = heads.link(stored.event.tenant_id, columns)
            conn.execute(sql.IMPORT_EVENT, (stored.position, *columns, *links))


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
    database: SQLiteDatabase, tenant_id: str, changes: Sequence[ItemChange], through: int
) -> dict[ScopeKey, int]:
    """Replace the tenant's rows in bulk: a few statements, not a few per item.

    Refused with ``LogMoved`` if the tenant's last event is no longer at ``through``.
    Returns the ids of the tenant's scopes, committed.
    """
    with database.write_transaction(deferred=True) as conn:
        # The write transaction holds the write lock: no event can land until this
        # rebuild commits, so the check below cannot be overtaken.
        (last,) = conn.execute(sql.TENANT_HEAD, (tenant_id,)).fetchone()
        if last != through:  # a write landed after the log was read: fold again
            raise LogMoved(f"tenant {tenant_id!r} has events after position {through}")
        scopes = _clear(conn, tenant_id)
        for change in changes:
            key = (tenant_id, change.item.agent_id, change.item.purpose)
            if change.index is not None and key not in scopes:
                conn.execute(sql.NEW_SCOPE, key)
                scopes[key] = conn.execute(sql.GET_SCOPE_ID, key).fetchone()[0]
        (top,) = conn.execute(sql.TOP_ROWID).fetchone()
        totals = {scope: [0, 0] for scope in scopes.values()}
        # A chunk of items at a time: the rows of a whole tenant are never held at once.
        for start in range(0, len(changes), LOAD_CHUNK):
            chunk = changes[start : start + LOAD_CHUNK]
            rows = _Rows.of(tenant_id, chunk, scopes, first_rowid=top + 1 + start)
            conn.executemany(sql.LOAD_ITEM, rows.items)
            conn.executemany(sql.INSERT_DOCUMENT, rows.documents)
            conn.executemany(sql.LOAD_VECTOR, rows.vectors)
            rows.postings.sort()  # in key order: each B-tree page is visited once a chunk
            conn.executemany(sql.INSERT_POSTING, rows.postings)
            for scope, (n, length) in rows.totals.items():
                totals[scope][0] += n
                totals[scope][1] += length
        conn.executemany(
            sql.SCOPE_TOTALS, [(n, length, scope) for scope, (n, length) in totals.items()]
        )
    return scopes


def _clear(conn: sqlite3.Connection, tenant_id: str) -> dict[ScopeKey, int]:
    """Delete the tenant's items, documents and postings; its scopes' ids, which stay."""
    scopes = conn.execute(sql.TENANT_SCOPES, (tenant_id,)).fetchall()
    for scope, *_ in scopes:
        conn.execute(sql.DELETE_SCOPE_POSTINGS, (scope,))
        conn.execute(sql.DELETE_SCOPE_VECTORS, (scope,))
    conn.execute(sql.DELETE_TENANT_DOCUMENTS, (tenant_id,))
    conn.execute(sql.DELETE_TENANT_ITEMS, (tenant_id,))
    return {(t, a, p): scope for scope, t, a, p in scopes}


@dataclass
class _Rows:
    """Every row a rebuild inserts, and each scope's new document count and length."""

    items: list[tuple[Any, ...]] = field(default_factory=list)
    documents: list[tuple[Any, ...]] = field(default_factory=list)
    postings: list[tuple[Any, ...]] = field(default_factory=list)
    vectors: list[tuple[Any, ...]] = field(default_factory=list)
    totals: dict[int, list[int]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        tenant_id: str,
        changes: Sequence[ItemChange],
        scopes: dict[ScopeKey, int],
        first_rowid: int,
    ) -> _Rows:
        rows = cls(totals={scope: [0, 0] for scope in scopes.values()})
        for rowid, change in enumerate(changes, start=first_rowid):
            item, index = change.item, change.index
            rows.items.append((rowid, *item_row(item)))
            if index is None:
                continue
            scope = scopes[(tenant_id, item.agent_id, item.purpose)]
            rows.documents.append(document_row(rowid, scope, item, index))
            if index.vector is not None:
                rows.vectors.append((rowid, scope, index.vector))
            rows.totals[scope][0] += 1
            rows.totals[scope][1] += index.length
            rows.postings.extend(posting_rows(rowid, scope, index))
        return rows


__all__ = ["import_events", "import_idempotency", "import_item_keys", "rebuild"]
