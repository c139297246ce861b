"""Bulk paths of the SQLite store: importing a log, rebuilding a tenant's projection.

Both run in one write transaction of their own (outside group commit) and write with a few
``executemany`` statements rather than a few statements per item; a rebuild writes only
the rows that differ from the fold of the log.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import partial
from itertools import count, islice

from governed_memory.codec import idempotency_result, stored_columns
from governed_memory.core.events import StoredEvent
from governed_memory.records import (
    IdempotencyRecord,
    ItemKey,
    TenantRebuild,
)
from governed_memory.store.chain_links import Heads
from governed_memory.store.paging import require_ascending
from governed_memory.store.rebuild_diff import (
    Diff,
    compared,
    diff,
    load,
    needed_scopes,
)
from governed_memory.store.sqlite import sql
from governed_memory.store.sqlite.batch import head_hash
from governed_memory.store.sqlite.database import SQLiteDatabase
from governed_memory.store.sqlite.held import Held, head, still_held, stored_rows
from governed_memory.store.sqlite.index_rows import document_row

ScopeKey = tuple[str, str, str]


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
        moved = {t.tenant_id for t in tenants if head(conn, t.tenant_id) != t.through}
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


__all__ = ["import_events", "import_idempotency", "import_item_keys", "rebuild"]
