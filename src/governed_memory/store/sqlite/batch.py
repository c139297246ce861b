"""Applying batches to SQLite: one ``BEGIN IMMEDIATE`` transaction per group of batches.

The group commit (:mod:`governed_memory.store.group_commit`) hands the leader every queued
batch; here they are applied in one transaction, which commits once. A group of several
is applied first without savepoints (two statements fewer a write, in the part of the
commit no other writer can overlap); if one of its batches fails, the transaction is
rolled back and begun again, and the group applied again, each batch inside its own
savepoint: a failed batch rolls back to its savepoint and fails alone; the others commit.

Each batch is checked in one order, which the PostgreSQL store follows too: the
idempotency key (:class:`IdempotencyKeyTaken`), the required subject key
(:class:`SubjectKeyGone`), each item's version (:class:`VersionConflict`), and for a forget
the subject's items left undeleted (:class:`SubjectChanged`).
"""

from __future__ import annotations

import sqlite3
from collections import ChainMap
from collections.abc import MutableMapping
from functools import partial

from governed_memory.codec import (
    idempotency_from_row,
    idempotency_result,
    item_row,
    stored_columns,
)
from governed_memory.core.events import StoredEvent
from governed_memory.core.model import ItemState
from governed_memory.errors import (
    IdempotencyKeyTaken,
    StoreUnavailable,
    SubjectChanged,
    SubjectKeyGone,
    VersionConflict,
)
from governed_memory.records import SEARCH_INDEX, Batch, ItemChange, SubjectKey, serves_index
from governed_memory.store.chain_links import Heads
from governed_memory.store.group_commit import Pending
from governed_memory.store.sqlite import sql
from governed_memory.store.sqlite.database import SQLiteDatabase, rollback, translate
from governed_memory.store.sqlite.index_rows import drop_index, write_index
from governed_memory.store.sqlite.wal import PURGE_DUE

ScopeKey = tuple[str, str, str]
ScopeIds = MutableMapping[ScopeKey, int]


class SQLiteBatches:
    """Commits groups of batches on the writer connection; remembers scope ids."""

    def __init__(self, database: SQLiteDatabase) -> None:
        self._db = database
        #: (tenant, agent, purpose) → scope row id, for scopes known to be committed.
        self.scope_ids: dict[ScopeKey, int] = {}

    def commit_group(self, group: list[Pending]) -> None:
        """Apply every batch of ``group`` in one transaction (the write lock is held)."""
        conn = self._db.writer
        try:
            if self._db.closed:
                raise StoreUnavailable("the store is closed")
            conn.execute("BEGIN IMMEDIATE")
            new_scopes = self._apply_all(conn, group) if len(group) > 1 else None
            if new_scopes is None:
                new_scopes = self._apply_each(conn, group)
            if len(group) == 1 and group[0].error is not None:
                conn.execute("ROLLBACK")
            else:
                conn.execute("COMMIT")
        except BaseException as error:  # the whole group failed to commit
            rollback(conn)  # a failed COMMIT may have rolled back already
            failure = (
                translate(error)
                if isinstance(error, Exception)
                else StoreUnavailable("the write was interrupted")
            )
            for pending in group:  # nobody is acknowledged for a transaction that failed
                pending.error, pending.result = pending.error or failure, []
            if not isinstance(error, Exception):
                raise
        else:
            self.scope_ids.update(new_scopes)
            if any(p.batch.destroys_keys and p.error is None for p in group):
                # Forget, erase, retention: push the purged pages out of the WAL so that no
                # destroyed key lingers there. While a reader pins the WAL (a checkpoint is
                # due already), one try: a retention sweep destroying many keys must not
                # stall every writer a while for each of them.
                self._db.checkpoint(attempts=1 if self._db.checkpoint_due else 50)
            elif self._db.checkpoint_due:
                self._db.checkpoint(attempts=1)
        finally:
            for pending in group:
                pending.done = True

    def _apply_all(
        self, conn: sqlite3.Connection, group: list[Pending]
    ) -> dict[ScopeKey, int] | None:
        """Apply every batch of ``group`` without savepoints (two statements fewer a write,
        in the serial part of a group's commit); the scopes created, or ``None`` when a
        batch failed: the transaction is then rolled back (unless SQLite did it itself,
        on an I/O error or an interrupt) and begun again, for :meth:`_apply_each` to
        apply the group batch by batch, so that the failed batch fails alone.

        A savepoint around the whole group would keep SQLite's lock between the two
        passes, but cost more than the per-batch savepoints it replaces (measured: 0.92×
        the writes/s of this). Between the ``ROLLBACK`` and the ``BEGIN IMMEDIATE`` only
        a writer that does not take turns on the lock file (:mod:`.turns`) can get in;
        every batch is then decided afresh on what it committed."""
        created: dict[ScopeKey, int] = {}
        for pending in group:
            try:
                pending.result = self._apply(conn, pending.batch, created)
            except Exception:  # noqa: BLE001 - decided again, batch by batch
                for each in group:
                    each.result = []
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                conn.execute("BEGIN IMMEDIATE")
                return None
        return created

    def _apply_each(self, conn: sqlite3.Connection, group: list[Pending]) -> dict[ScopeKey, int]:
        """Apply each batch in a savepoint of its own (none for a lone batch); the scopes
        the batches that stand have created."""
        new_scopes: dict[ScopeKey, int] = {}
        single = len(group) == 1
        for pending in group:
            if not single:
                conn.execute("SAVEPOINT batch")
            # Scopes created by a batch are remembered only if the batch stands: a
            # rolled-back scope row's id would be reused for another scope.
            created: dict[ScopeKey, int] = {}
            try:
                scopes = ChainMap(created, new_scopes)  # writes land in ``created``
                pending.result = self._apply(conn, pending.batch, scopes)
            except Exception as error:  # noqa: BLE001 - fails this batch alone
                pending.error = translate(error)
                if not single:
                    conn.execute("ROLLBACK TO batch")
            else:
                new_scopes.update(created)
            if not single:
                conn.execute("RELEASE batch")
        return new_scopes

    def _apply(self, conn: sqlite3.Connection, batch: Batch, scopes: ScopeIds) -> list[StoredEvent]:
        heads = Heads(partial(head_hash, conn))  # read inside this batch's savepoint
        self._check_keys(conn, batch, heads)
        stored = []
        for event in batch.events:  # first: an item's row may point at its new event
            columns, stored_row = stored_columns(event)
            links = heads.link(event.tenant_id, columns)
            try:
                (position,) = conn.execute(sql.INSERT_EVENT, (*stored_row, *links)).fetchone()
            except sqlite3.IntegrityError:
                self._refuse_stale(conn, batch)  # a stale change is the batch's refusal
                raise
            stored.append(StoredEvent(position, event))
        for change in batch.changes:
            rowid = self._write_item(conn, change)
            self._reindex(conn, change, rowid, scopes)
        if batch.idempotency is not None:
            record = batch.idempotency
            conn.execute(
                sql.INSERT_IDEMPOTENCY,
                (
                    batch.tenant_id,
                    record.credential,
                    record.key,
                    record.fingerprint,
                    idempotency_result(record),
                    stored[0].position if stored else None,
                ),
            )
        self._change_item_keys(conn, batch)
        if batch.destroy_key is not None:
            self._destroy_key(conn, batch.tenant_id, batch.destroy_key)
        if batch.destroys_keys:  # durable with the destruction: see PURGE_DUE
            conn.execute(sql.REPLACE_META, (PURGE_DUE, "due"))
        return stored

    @staticmethod
    def _check_keys(conn: sqlite3.Connection, batch: Batch, heads: Heads) -> None:
        """Refuse a batch whose idempotency key is taken or whose subject key is gone, or
        whose postings were made for another index than the one recorded. A write's
        tenant's chain head is read in the same statement (one fewer a write) and given
        to ``heads``."""
        tenant, required = batch.tenant_id, batch.require_key
        index: str | None = None  # the recorded index, read with the key when both are due
        key_id: bytes | None = None
        if batch.index_signature is not None and required is not None:
            index, key_id, head = conn.execute(
                sql.INDEX_KEY_AND_HEAD,
                (SEARCH_INDEX, required.tenant_id, required.subject_id, tenant),
            ).fetchone()
            heads.known(tenant, None if head is None else bytes(head))
        elif batch.index_signature is not None:
            row = conn.execute(sql.GET_META, (SEARCH_INDEX,)).fetchone()
            index = None if row is None else row[0]
        elif required is not None:
            row = conn.execute(sql.GET_KEY_ID, (required.tenant_id, required.subject_id)).fetchone()
            key_id = None if row is None else row[0]
        if batch.index_signature is not None and not serves_index(index, batch.index_signature):
            raise StoreUnavailable.index_rebuilt()
        if batch.idempotency is not None:
            credential, key = batch.idempotency.credential, batch.idempotency.key
            row = conn.execute(sql.GET_IDEMPOTENCY, (tenant, credential, key)).fetchone()
            if row is not None:
                raise IdempotencyKeyTaken(idempotency_from_row(tenant, credential, key, row))
        if required is not None and (key_id is None or bytes(key_id) != required.key_id):
            raise SubjectKeyGone(f"a subject key of tenant {tenant!r} was destroyed")

    @staticmethod
    def _change_item_keys(conn: sqlite3.Connection, batch: Batch) -> None:
        """Store the key of the item the batch creates; delete the key it destroys."""
        key = batch.new_item_key
        if key is not None:
            conn.execute(
                sql.INSERT_ITEM_KEY,
                (key.tenant_id, key.memory_id, key.subject_id, key.key_id, key.wrapped),
            )
        if batch.destroy_item_key is not None:
            conn.execute(sql.DESTROY_ITEM_KEY, (batch.tenant_id, batch.destroy_item_key))

    @staticmethod
    def _destroy_key(conn: sqlite3.Connection, tenant: str, subject: str) -> None:
        """Delete the subject's key and its items' keys, unless an item of the subject is
        left undeleted."""
        if conn.execute(sql.SUBJECT_LEFT, (tenant, subject)).fetchone() is not None:
            raise SubjectChanged(f"a subject of tenant {tenant!r} changed during forget")
        conn.execute(sql.DESTROY_KEY, (tenant, subject))
        conn.execute(sql.DESTROY_ITEM_KEYS, (tenant, subject))

    def _write_item(self, conn: sqlite3.Connection, change: ItemChange) -> int:
        """Insert or update the item's row, guarded by its version; the row's rowid."""
        item = change.item
        row = item_row(item)
        if change.expected_version == 0:
            try:
                (rowid,) = conn.execute(sql.INSERT_ITEM, row).fetchone()
                return int(rowid)
            except sqlite3.IntegrityError:
                raise VersionConflict(item.id, 0, self._version(conn, item)) from None
        found = conn.execute(sql.UPDATE_ITEM, (*row, change.expected_version)).fetchone()
        if found is None:
            raise VersionConflict(item.id, change.expected_version, self._version(conn, item))
        return int(found[0])

    def _refuse_stale(self, conn: sqlite3.Connection, batch: Batch) -> None:
        """Raise :class:`VersionConflict` for the first change whose item is not at the
        version the batch expects. The events go in before the items (an item's row points
        at its event), so a batch that an event's unique key refuses is classified here as
        it would be by its items' guards, had they come first."""
        for change in batch.changes:
            found = self._version(conn, change.item)
            if found != change.expected_version:
                raise VersionConflict(change.item.id, change.expected_version, found)

    @staticmethod
    def _version(conn: sqlite3.Connection, item: ItemState) -> int:
        row = conn.execute(sql.GET_VERSION, (item.tenant_id, item.id)).fetchone()
        return 0 if row is None else int(row[0])

    def _scope_id(self, conn: sqlite3.Connection, item: ItemState, scopes: ScopeIds) -> int:
        key = (item.tenant_id, item.agent_id, item.purpose)
        known = self.scope_ids.get(key) or scopes.get(key)
        if known is not None:
            return known
        conn.execute(sql.INSERT_SCOPE, key)
        (scope,) = conn.execute(sql.GET_SCOPE_ID, key).fetchone()
        scopes[key] = int(scope)
        return int(scope)

    def _reindex(
        self, conn: sqlite3.Connection, change: ItemChange, rowid: int, scopes: ScopeIds
    ) -> None:
        """Replace the item's postings, its search document and its scope's totals."""
        if change.expected_version != 0:
            drop_index(conn, rowid)
        index = change.index
        if index is None:
            return
        scope = self._scope_id(conn, change.item, scopes)
        write_index(conn, rowid, scope, change.item, index)

    def add_subject_key(self, key: SubjectKey) -> SubjectKey:
        """Store ``key`` unless the subject has one (its own transaction); the stored one."""
        with self._db.write_transaction() as conn:
            conn.execute(
                sql.INSERT_SUBJECT_KEY, (key.tenant_id, key.subject_id, key.key_id, key.wrapped)
            )
        rows = self._db.query(sql.GET_SUBJECT_KEY, (key.tenant_id, key.subject_id))
        assert rows, "a subject key was stored and is gone"
        return SubjectKey(key.tenant_id, key.subject_id, bytes(rows[0][0]), bytes(rows[0][1]))


def head_hash(conn: sqlite3.Connection, tenant_id: str) -> bytes | None:
    """The hash of the tenant's last event (``None`` before its first)."""
    row = conn.execute(sql.TENANT_HEAD_HASH, (tenant_id,)).fetchone()
    return None if row is None or row[0] is None else bytes(row[0])


__all__ = ["SQLiteBatches", "head_hash"]
