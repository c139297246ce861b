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
from governed_memory.records import IdempotencyRecord, ItemChange, ItemKey, TenantRebuild
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
    database: SQLiteDatabase, tenants: Sequence[TenantRebuild]
) -> tuple[set[str], dict[ScopeKey, int]]:
    """Replace the rows of several tenants in bulk, in one transaction: a few statements
    per tenant and a few per chunk of items, not a few per item.

    A tenant whose last event is no longer at its ``through`` is left as it is. Returns
    those tenants, and the ids of the other tenants' scopes, committed.
    """
    with database.write_transaction(deferred=True) as conn:
        # The write transaction holds the write lock: no event can land until this
        # rebuild commits, so the checks below cannot be overtaken.
        moved = {t.tenant_id for t in tenants if _head(conn, t.tenant_id) != t.through}
        swapped = [t for t in tenants if t.tenant_id not in moved]
        scopes = _clear(conn, [tenant.tenant_id for tenant in swapped])
        changes = [change for tenant in swapped for change in tenant.changes]
        for change in changes:
            key = (change.item.tenant_id, change.item.agent_id, change.item.purpose)
            if change.index is not None and key not in scopes:
                conn.execute(sql.NEW_SCOPE, key)
                scopes[key] = conn.execute(sql.GET_SCOPE_ID, key).fetchone()[0]
        (top,) = conn.execute(sql.TOP_ROWID).fetchone()
        totals = {scope: [0, 0] for scope in scopes.values()}
        # A chunk of items at a time: the rows of all of them are never held at once.
        for start in range(0, len(changes), LOAD_CHUNK):
            chunk = changes[start : start + LOAD_CHUNK]
            rows = _Rows.of(chunk, scopes, first_rowid=top + 1 + start)
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
    return moved, scopes


def _head(conn: sqlite3.Connection, tenant_id: str) -> int:
    """The position of the tenant's last event (0: none)."""
    (last,) = conn.execute(sql.TENANT_HEAD, (tenant_id,)).fetchone()
    return int(last)


def _clear(conn: sqlite3.Connection, tenant_ids: list[str]) -> dict[ScopeKey, int]:
    """Delete the tenants' items, documents and postings; their scopes' ids, which stay."""
    scopes = {
        (tenant, agent, purpose): scope
        for tenant_id in tenant_ids
        for scope, tenant, agent, purpose in conn.execute(sql.TENANT_SCOPES, (tenant_id,))
    }
    ids = [(scope,) for scope in scopes.values()]
    conn.executemany(sql.DELETE_SCOPE_POSTINGS, ids)
    conn.executemany(sql.DELETE_SCOPE_VECTORS, ids)
    tenants = [(tenant_id,) for tenant_id in tenant_ids]
    conn.executemany(sql.DELETE_TENANT_DOCUMENTS, tenants)
    conn.executemany(sql.DELETE_TENANT_ITEMS, tenants)
    return scopes


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
        cls, changes: Sequence[ItemChange], scopes: dict[ScopeKey, int], first_rowid: int
    ) -> _Rows:
        rows = cls()
        for rowid, change in enumerate(changes, start=first_rowid):
            item, index = change.item, change.index
            rows.items.append((rowid, *item_row(item)))
            if index is None:
                continue
            scope = scopes[(item.tenant_id, item.agent_id, item.purpose)]
            rows.documents.append(document_row(rowid, scope, item, index))
            if index.vector is not None:
                rows.vectors.append((rowid, scope, index.vector))
            total = rows.totals.setdefault(scope, [0, 0])
            total[0] += 1
            total[1] += index.length
            rows.postings.extend(posting_rows(rowid, scope, index))
        return rows


__all__ = ["import_events", "import_idempotency", "import_item_keys", "rebuild"]
