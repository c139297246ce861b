"""Bulk paths of the PostgreSQL store: importing a log, rebuilding a tenant's projection.

Both run in one write transaction holding the log's write lock. An import sends its
events with ``executemany``; a rebuild loads projection rows and postings with ``COPY``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from governed_memory.codec import EVENT_COLUMNS, idempotency_result, item_row
from governed_memory.core.events import StoredEvent
from governed_memory.records import IdempotencyRecord, ItemChange, ItemKey, TenantRebuild
from governed_memory.store.chain_links import Heads, event_columns
from governed_memory.store.paging import require_ascending
from governed_memory.store.postgres import sql
from governed_memory.store.postgres.database import Connection, PostgresDatabase
from governed_memory.store.postgres.index_rows import document_row, posting_rows


def import_events(database: PostgresDatabase, events: Sequence[StoredEvent]) -> None:
    """Append ``events`` with their own positions, each above the log's head, atomically."""
    with database.write_transaction() as conn:
        row = conn.execute(sql.HEAD).fetchone()
        require_ascending(events, int(row[0]) if row else 0)
        heads = Heads(partial(_head_hash, conn))
        params = [_import_params(stored, heads) for stored in events]
        with conn.cursor() as cursor:
            cursor.executemany(sql.IMPORT_EVENT, params)


def _import_params(stored: StoredEvent, heads: Heads) -> dict[str, Any]:
    """The parameters of ``sql.IMPORT_EVENT``: position, columns, the chain's hashes."""
    columns = event_columns(stored.event)
    prev_hash, hash_ = heads.link(stored.event.tenant_id, columns)
    return dict(zip(EVENT_COLUMNS, columns, strict=True)) | {
        "position": stored.position,
        "prev_hash": prev_hash,
        "hash": hash_,
    }


def _head_hash(conn: Connection, tenant_id: str) -> bytes | None:
    """The hash of the tenant's last event (``None`` before its first)."""
    row = conn.execute(sql.TENANT_HEAD_HASH, (tenant_id,)).fetchone()
    return None if row is None or row[0] is None else bytes(row[0])


def import_item_keys(database: PostgresDatabase, keys: Sequence[ItemKey]) -> None:
    """Store imported item keys in one transaction (a duplicate refuses them all)."""
    with database.write_transaction() as conn, conn.cursor() as cursor:
        cursor.executemany(
            sql.INSERT_ITEM_KEY,
            [(k.tenant_id, k.memory_id, k.subject_id, k.key_id, k.wrapped) for k in keys],
        )


def import_idempotency(database: PostgresDatabase, records: Sequence[IdempotencyRecord]) -> None:
    """Store imported idempotency records in one transaction (a duplicate refuses them
    all)."""
    with database.write_transaction() as conn, conn.cursor() as cursor:
        cursor.executemany(
            sql.IMPORT_IDEMPOTENCY,
            [
                (r.tenant_id, r.credential, r.key, r.fingerprint, idempotency_result(r), r.position)
                for r in records
            ],
        )


def rebuild(database: PostgresDatabase, tenants: Sequence[TenantRebuild]) -> set[str]:
    """Replace the projection rows and postings of several tenants with their changes, in
    one transaction; a tenant whose last event is no longer at its ``through`` is left as
    it is, and returned."""
    moved: set[str] = set()
    with database.write_transaction() as conn:
        # write_transaction holds the log's write lock: no event can land until this
        # rebuild commits, so the checks below cannot be overtaken.
        for tenant in tenants:
            tenant_id = tenant.tenant_id
            row = conn.execute(sql.TENANT_HEAD, (tenant_id,)).fetchone()
            if (int(row[0]) if row else 0) != tenant.through:
                moved.add(tenant_id)
                continue
            scopes = [row[0] for row in conn.execute(sql.TENANT_SCOPE_IDS, (tenant_id,))]
            conn.execute(sql.DELETE_SCOPE_POSTINGS, (scopes,))
            conn.execute(sql.DELETE_TENANT_DOCUMENTS, (tenant_id,))
            conn.execute(sql.DELETE_SCOPE_VECTORS, (scopes,))
            conn.execute(sql.EMPTY_SCOPES, (tenant_id,))
            conn.execute(sql.DELETE_TENANT_ITEMS, (tenant_id,))
            if tenant.changes:
                _load(conn, tenant_id, tenant.changes)
    return moved


def _load(conn: Connection, tenant_id: str, changes: Sequence[ItemChange]) -> None:
    """Bulk-load a tenant's projection rows and postings with COPY."""
    scope_ids = _scopes(conn, tenant_id, changes)
    rowids = [row[0] for row in conn.execute(sql.NEXT_ROWIDS, (len(changes),))]
    with conn.cursor() as cursor:
        with cursor.copy(sql.COPY_ITEMS) as copy:
            for rowid, change in zip(rowids, changes, strict=True):
                copy.write_row((rowid, *item_row(change.item)))
        documents: list[tuple[Any, ...]] = []
        vectors: list[tuple[int, int, bytes]] = []
        totals: dict[int, list[int]] = {}
        with cursor.copy(sql.COPY_POSTINGS) as copy:
            for rowid, change in zip(rowids, changes, strict=True):
                item, index = change.item, change.index
                if index is None:
                    continue
                scope = scope_ids[(item.agent_id, item.purpose)]
                documents.append(document_row(rowid, scope, item, index))
                total = totals.setdefault(scope, [0, 0])
                total[0] += 1
                total[1] += index.length
                if index.vector is not None:
                    vectors.append((rowid, scope, index.vector))
                for row in posting_rows(rowid, scope, index):
                    copy.write_row(row)
        with cursor.copy(sql.COPY_DOCUMENTS) as copy:
            for document in documents:
                copy.write_row(document)
        if vectors:
            with cursor.copy(sql.COPY_VECTORS) as copy:
                for vector in vectors:
                    copy.write_row(vector)
    ids = sorted(totals)
    conn.execute(
        sql.SCOPE_TOTALS,
        (ids, [totals[i][0] for i in ids], [totals[i][1] for i in ids]),
    )


def _scopes(
    conn: Connection, tenant_id: str, changes: Sequence[ItemChange]
) -> dict[tuple[str, str], int]:
    """The id of each of the tenant's scopes, by (agent, purpose), created where missing."""
    indexed = sorted({(c.item.agent_id, c.item.purpose) for c in changes if c.index is not None})
    conn.execute(sql.NEW_SCOPES, (tenant_id, [k[0] for k in indexed], [k[1] for k in indexed]))
    return {
        (agent, purpose): scope
        for agent, purpose, scope in conn.execute(sql.TENANT_SCOPES, (tenant_id,))
    }


__all__ = ["import_events", "import_idempotency", "import_item_keys", "rebuild"]
