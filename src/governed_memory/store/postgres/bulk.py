"""Bulk paths of the PostgreSQL store: importing a log, rebuilding a tenant's projection.

Both run in one write transaction holding the log's write lock. An import sends its
events with ``executemany``; a rebuild writes only the rows that differ from the fold of
the log, loading new ones with ``COPY``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from governed_memory.codec import EVENT_COLUMNS, idempotency_result
from governed_memory.core.events import StoredEvent
from governed_memory.records import IdempotencyRecord, ItemKey, TenantRebuild
from governed_memory.store.chain_links import Heads, event_columns
from governed_memory.store.paging import require_ascending
from governed_memory.store.postgres import sql
from governed_memory.store.postgres.database import Connection, PostgresDatabase
from governed_memory.store.postgres.index_rows import document_row
from governed_memory.store.rebuild_diff import Diff, Stored, compared, diff, load, needed_scopes


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
    """Make the rows of several tenants the folded ones, in one transaction, writing only
    what differs from what they hold (:mod:`governed_memory.store.rebuild_diff`): over an
    intact projection that is nothing, over an empty one every row (by ``COPY``), and so
    over a tenant too large to compare, whose rows are deleted first. A tenant
    whose last event is no longer at its ``through`` is left as it is, and returned."""
    moved: set[str] = set()
    with database.write_transaction() as conn:
        # write_transaction holds the log's write lock: no event can land until this
        # rebuild commits, so the checks and reads below cannot be overtaken.
        for tenant in tenants:
            row = conn.execute(sql.TENANT_HEAD, (tenant.tenant_id,)).fetchone()
            if (int(row[0]) if row else 0) != tenant.through:
                moved.add(tenant.tenant_id)
        swapped = [tenant for tenant in tenants if tenant.tenant_id not in moved]
        if not swapped:
            return moved
        for tenant in swapped:
            if not compared(tenant.changes):  # read back empty below, then loaded whole
                for statement in sql.CLEAR_TENANT:
                    conn.execute(statement, (tenant.tenant_id,))
        stored = _stored(conn, swapped)

        def allocate(n: int) -> list[int]:
            return [row[0] for row in conn.execute(sql.NEXT_ROWIDS, (n,))] if n else []

        writes = Diff()
        for tenant in swapped:
            held = stored[tenant.tenant_id]
            if held.empty():
                for rows in load(tenant.changes, held, allocate, document_row):
                    _write(conn, rows)
            else:
                writes.extend(diff(tenant.changes, held, allocate, document_row))
        _write(conn, writes)
    return moved


def _stored(conn: Connection, tenants: Sequence[TenantRebuild]) -> dict[str, Stored]:
    """What each tenant's rows hold (a few statements for all of them), its scopes created
    where its searchable items need one."""
    ids = [tenant.tenant_id for tenant in tenants]
    missing = {tenant.tenant_id: needed_scopes(tenant.changes) for tenant in tenants}
    stored = {tenant_id: Stored() for tenant_id in ids}
    owner: dict[int, Stored] = {}
    for tenant_id, agent, purpose, scope, documents, length in conn.execute(
        sql.REBUILD_SCOPES, (ids,)
    ):
        stored[tenant_id].scopes[(agent, purpose)] = (scope, int(documents), int(length))
        owner[scope] = stored[tenant_id]
    for tenant_id, needed in missing.items():
        new = [key for key in needed if key not in stored[tenant_id].scopes]
        if new:
            conn.execute(sql.NEW_SCOPES, (tenant_id, [k[0] for k in new], [k[1] for k in new]))
            for agent, purpose, scope in conn.execute(sql.TENANT_SCOPES, (tenant_id,)):
                stored[tenant_id].scopes.setdefault((agent, purpose), (scope, 0, 0))
    rowids: dict[int, Stored] = {}
    for row in conn.execute(sql.REBUILD_ITEMS, (ids,)):
        tenant = stored[row[1]]
        tenant.items[row[2]] = (row[0], row[1:])
        rowids[row[0]] = tenant
    if rowids:
        for row in conn.execute(sql.REBUILD_DOCUMENTS, (ids,)):
            rowids[row[0]].documents[row[0]] = row
    if owner:  # the scopes made just now hold nothing yet
        scopes = list(owner)
        for posting in conn.execute(sql.REBUILD_POSTINGS, (scopes,)):
            owner[posting[0]].postings.append(posting)
        for item, scope, vector in conn.execute(sql.REBUILD_VECTORS, (scopes,)):
            owner[scope].vectors[item] = (scope, bytes(vector))
    return stored


def _write(conn: Connection, writes: Diff) -> None:
    """Apply a diff: what goes first, then what changes, then what comes (by ``COPY``)."""
    if writes.deleted_vectors:
        conn.execute(sql.DELETE_VECTORS, (writes.deleted_vectors,))
    if writes.deleted_documents:
        conn.execute(sql.DELETE_DOCUMENTS, (writes.deleted_documents,))
    if writes.deleted_postings:
        conn.execute(
            sql.DELETE_POSTINGS,
            [list(column) for column in zip(*writes.deleted_postings, strict=True)],
        )
    if writes.deleted_items:
        conn.execute(sql.DELETE_ITEMS, (writes.deleted_items,))
    with conn.cursor() as cursor:
        if writes.changed_items:
            cursor.executemany(
                sql.REWRITE_ITEM, [(*row[1:], row[0]) for row in writes.changed_items]
            )
        for statement, rows in (
            (sql.COPY_ITEMS, writes.new_items),
            (sql.COPY_DOCUMENTS, writes.new_documents),
            (sql.COPY_POSTINGS, writes.new_postings),
            (sql.COPY_VECTORS, writes.new_vectors),
        ):
            if rows:
                with cursor.copy(statement) as copy:
                    for row in rows:
                        copy.write_row(row)
    if writes.totals:
        totals = sorted(writes.totals, key=lambda total: total[2])
        conn.execute(
            sql.SCOPE_TOTALS,
            ([t[2] for t in totals], [t[0] for t in totals], [t[1] for t in totals]),
        )


__all__ = ["import_events", "import_idempotency", "import_item_keys", "rebuild"]
