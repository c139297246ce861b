"""The port's reads over a SQL database, written once for SQLite and PostgreSQL.

As eventsourcing does with its recorders, the logic is shared and the SQL is not: each
backend's ``sql`` module holds its statements (its placeholders, ``?`` or ``%s``; its way of
matching a list, ``IN (…)`` or ``= ANY (…)``) and satisfies :class:`Dialect`; its database
object runs them and satisfies :class:`Database`. A backend's store class derives from
:class:`SQLReads` and adds its writes, search and bulk paths.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from governed_memory.codec import (
    api_key_from_row,
    api_key_row,
    idempotency_from_row,
    item_from_row,
    stored_event_from_row,
)
from governed_memory.core.events import StoredEvent
from governed_memory.core.model import ItemState
from governed_memory.core.policy import RetentionKey
from governed_memory.core.values import Status, from_micros, to_micros
from governed_memory.records import (
    ApiKey,
    BrowseRequest,
    ChainLink,
    IdempotencyRecord,
    IndexedContent,
    IntactCheck,
    ItemKey,
    NothingIntact,
    RetentionCursor,
    SealedVector,
    SearchRequest,
    SearchRows,
    SubjectKey,
)
from governed_memory.store.chain_links import link_from_row
from governed_memory.store.paging import paged_events
from governed_memory.store.search_rows import index_entries, search_rows

#: Above every position: where a read newest first starts.
NEWEST = 2**63 - 1
#: How many decoded API keys :meth:`SQLReads.api_key` keeps (all dropped when full).
DECODED_KEYS_KEPT = 1_024


class Dialect(Protocol):
    """The statements the shared reads run: a backend's ``sql`` module."""

    P: str  # the placeholder of one positional parameter
    EVERY_ROW: int | None  # the LIMIT parameter that reads every row
    ITEM_SELECT: str
    GET_ITEM: str
    WRITE_STATE: str
    SUBJECT_ITEMS: str
    GET_SUBJECT_KEY: str
    SUBJECT_KEYS_OF: str
    SUBJECT_KEYS: str
    GET_IDEMPOTENCY: str
    IDEMPOTENCY_PAGE: str
    EVENTS_AFTER: str
    TENANT_EVENTS_AFTER: str
    TENANT_EVENTS_BEFORE: str
    MEMORY_EVENTS: str
    CHAIN_AFTER: str
    TENANT_CHAIN_AFTER: str
    DUE_FOR_EXPIRY: str
    DUE_FOR_RETENTION: str
    QUARANTINE: str
    GET_ITEM_KEY: str
    ITEM_KEYS_OF: str
    ITEM_KEYS: str
    TENANTS: str
    TENANT_ITEMS: str
    HEAD: str
    SCHEMA_VERSION: str
    API_KEY_SELECT: str
    GET_API_KEY: str
    INSERT_API_KEY: str
    REVOKE_API_KEY: str
    TOUCH_API_KEY: str
    GET_META: str
    CLAIM_META: str
    REPLACE_META: str
    SCOPE_VECTORS: str

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` matches one of ``values``: the condition and its parameters."""
        ...


class Database(Protocol):
    """What the shared reads need of a backend's database object."""

    def query(self, sql: str, params: Sequence[Any] = (), *, wait: bool = True) -> list[Any]:
        """The rows of one read (in this thread's snapshot, if one is open). With
        ``wait=False`` raise ``ReadWouldWait`` rather than wait for the database."""
        ...

    def write(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """Run one writing statement on its own, committed; the rows it returns."""
        ...


class SQLReads:
    """The port's reads, and the API-key admin, over a :class:`Database`."""

    def __init__(self, database: Database, dialect: Dialect) -> None:
        self._db = database
        self._sql = dialect
        # Decoded API keys by their whole stored row: the HTTP edge reads the key of every
        # request afresh (a revocation counts from the next request), and decoding the
        # same row again cost more than reading it. Any change to the row (revoked,
        # expired, a new last use) is another row, decoded anew.
        self._decoded_keys: dict[tuple[Any, ...], ApiKey] = {}

    # -- items ----------------------------------------------------------------------------

    def get(self, tenant_id: str, memory_id: str) -> ItemState | None:
        rows = self._db.query(self._sql.GET_ITEM, (tenant_id, memory_id))
        return item_from_row(rows[0]) if rows else None

    def write_state(
        self, tenant_id: str, subject_id: str, memory_id: str
    ) -> tuple[SubjectKey | None, ItemState | None]:
        (row,) = self._db.query(
            self._sql.WRITE_STATE, (tenant_id, subject_id, tenant_id, memory_id)
        )
        key_id, wrapped, item = row[0], row[1], row[2:]
        key = (
            None
            if key_id is None
            else SubjectKey(tenant_id, subject_id, bytes(key_id), bytes(wrapped))
        )
        return key, (None if item[0] is None else item_from_row(tuple(item)))

    def get_many(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, ItemState]:
        if not memory_ids:
            return {}
        condition, params = self._sql.any_of("id", memory_ids)
        rows = self._db.query(
            f"{self._sql.ITEM_SELECT} WHERE tenant_id = {self._sql.P} AND {condition}",
            (tenant_id, *params),
        )
        items = (item_from_row(row) for row in rows)
        return {item.id: item for item in items}

    def subject_items(self, tenant_id: str, subject_id: str) -> list[ItemState]:
        rows = self._db.query(self._sql.SUBJECT_ITEMS, (tenant_id, subject_id))
        return [item_from_row(row) for row in rows]

    def due_for_expiry(self, now: datetime, limit: int) -> list[ItemState]:
        rows = self._db.query(self._sql.DUE_FOR_EXPIRY, (to_micros(now), limit))
        return [item_from_row(row) for row in rows]

    def due_for_retention(
        self, cutoffs: Mapping[RetentionKey, datetime], limit: int, after: RetentionCursor | None
    ) -> list[ItemState]:
        if not cutoffs:
            return []
        p = self._sql.P
        keys = sorted(cutoffs)
        # The outer bound lets the partial index (updated_at, tenant_id, id) serve the scan;
        # each (kind, status) then has its own cutoff.
        sql = self._sql.DUE_FOR_RETENTION + f" AND updated_at <= {p} AND ("
        sql += " OR ".join(f"(kind = {p} AND status = {p} AND updated_at <= {p})" for _ in keys)
        sql += ")"
        params: list[Any] = [max(to_micros(at) for at in cutoffs.values())]
        for kind, status in keys:
            params += [kind.value, status.value, to_micros(cutoffs[(kind, status)])]
        if after is not None:
            sql += f" AND (updated_at, tenant_id, id) > ({p}, {p}, {p})"
            params += list(after)
        sql += f" ORDER BY updated_at, tenant_id, id LIMIT {p}"
        params.append(limit)
        return [item_from_row(row) for row in self._db.query(sql, params)]

    def quarantine(
        self,
        tenant_id: str,
        agents: frozenset[str] | None,
        agent_id: str | None,
        purpose: str | None,
        limit: int,
        after: tuple[int, str] | None,
        now: datetime | None = None,
    ) -> list[ItemState]:
        p = self._sql.P
        sql, params = self._filtered(
            self._sql.QUARANTINE, [tenant_id], agents, {"agent_id": agent_id, "purpose": purpose}
        )
        if now is not None:
            sql += f" AND expires_at > {p}"
            params.append(to_micros(now))
        return self._page(sql, params, after, limit)

    def browse(self, request: BrowseRequest) -> list[ItemState]:
        p = self._sql.P
        equal = {
            "agent_id": request.agent_id,
            "purpose": request.purpose,
            "subject_id": request.subject_id,
            "kind": None if request.kind is None else request.kind.value,
        }
        sql, params = self._filtered(
            f"{self._sql.ITEM_SELECT} WHERE tenant_id = {p}",
            [request.tenant_id],
            request.agents,
            equal,
        )
        status, now = request.status, to_micros(request.now)
        if status is Status.EXPIRED:  # recorded as expired, or live and past its expiry
            sql += (
                f" AND (status = 'expired' OR (status IN ('active', 'quarantined') "
                f"AND expires_at <= {p}))"
            )
            params.append(now)
        elif status in (Status.ACTIVE, Status.QUARANTINED):
            sql += f" AND status = {p} AND expires_at > {p}"
            params += [status.value, now]
        elif status is not None:
            sql += f" AND status = {p}"
            params.append(status.value)
        return self._page(sql, params, request.after, request.limit, request.newest_first)

    def _filtered(
        self,
        sql: str,
        params: list[Any],
        agents: frozenset[str] | None,
        equal: Mapping[str, str | None],
    ) -> tuple[str, list[Any]]:
        """``sql`` narrowed to the credential's agents and to each column given a value."""
        if agents is not None:
            condition, values = self._sql.any_of("agent_id", sorted(agents))
            sql += f" AND {condition}"
            params += values
        for column, value in equal.items():
            if value is not None:
                sql += f" AND {column} = {self._sql.P}"
                params.append(value)
        return sql, params

    def _page(
        self,
        sql: str,
        params: list[Any],
        after: tuple[int, str] | None,
        limit: int,
        newest_first: bool = False,
    ) -> list[ItemState]:
        """The first ``limit`` rows of ``sql`` in (updated_at, id) order after ``after``
        (descending, from the newest, if ``newest_first``: the same index, read backwards)."""
        p = self._sql.P
        beyond, order = ("<", " DESC") if newest_first else (">", "")
        if after is not None:
            sql += f" AND (updated_at, id) {beyond} ({p}, {p})"
            params += list(after)
        sql += f" ORDER BY updated_at{order}, id{order} LIMIT {p}"
        params.append(limit)
        return [item_from_row(row) for row in self._db.query(sql, params)]

    def tenant_items(self, tenant_id: str) -> Iterator[ItemState]:
        rows = self._db.query(self._sql.TENANT_ITEMS, (tenant_id,))
        return (item_from_row(row) for row in rows)

    def search_rows(self, tenant_id: str) -> dict[str, SearchRows]:
        return search_rows(self._db, self._sql.P, tenant_id)

    def index_entries(self, tenant_id: str) -> dict[str, IndexedContent]:
        return index_entries(self._db, self._sql.P, tenant_id)

    def check_intact(self, tenants: Sequence[str]) -> IntactCheck:
        """None checked ahead (SQLite's store checks in worker processes)."""
        return NothingIntact()

    def scope_vectors(self, request: SearchRequest) -> list[SealedVector]:
        """The sealed vectors of the scope's items that pass every hard filter, in SQL."""
        p = self._sql.P
        scope = (request.tenant_id, request.agent_id, request.purpose)
        sql = self._sql.SCOPE_VECTORS
        params: list[Any] = [*scope, *scope, to_micros(request.now)]
        if request.subject_id is not None:
            sql += f" AND m.subject_id = {p}"
            params.append(request.subject_id)
        if request.kinds is not None:
            condition, values = self._sql.any_of("m.kind", sorted(k.value for k in request.kinds))
            sql += f" AND {condition}"
            params += values
        return [
            SealedVector(
                request.tenant_id,
                memory_id,
                subject,
                version,
                bytes(blob),
                confidence,
                from_micros(updated_at),
                tokens,
            )
            for memory_id, subject, version, blob, confidence, updated_at, tokens in (
                self._db.query(sql, params)
            )
        ]

    # -- subject keys ---------------------------------------------------------------------

    def subject_key(self, tenant_id: str, subject_id: str) -> SubjectKey | None:
        rows = self._db.query(self._sql.GET_SUBJECT_KEY, (tenant_id, subject_id))
        if not rows:
            return None
        return SubjectKey(tenant_id, subject_id, bytes(rows[0][0]), bytes(rows[0][1]))

    def subject_keys_for(self, tenant_id: str, subject_ids: Sequence[str]) -> dict[str, SubjectKey]:
        wanted = sorted(set(subject_ids))
        if not wanted:
            return {}
        condition, params = self._sql.any_of("subject_id", wanted)
        rows = self._db.query(f"{self._sql.SUBJECT_KEYS_OF} AND {condition}", (tenant_id, *params))
        return {s: SubjectKey(tenant_id, s, bytes(k), bytes(w)) for s, k, w in rows}

    def subject_keys(self, limit: int | None = None) -> Iterator[SubjectKey]:
        rows = self._db.query(
            self._sql.SUBJECT_KEYS, (self._sql.EVERY_ROW if limit is None else limit,)
        )
        return (SubjectKey(t, s, bytes(k), bytes(w)) for t, s, k, w in rows)

    # -- item keys ------------------------------------------------------------------------

    def item_key(self, tenant_id: str, memory_id: str) -> ItemKey | None:
        rows = self._db.query(self._sql.GET_ITEM_KEY, (tenant_id, memory_id))
        if not rows:
            return None
        subject, key_id, wrapped = rows[0]
        return ItemKey(tenant_id, memory_id, subject, bytes(key_id), bytes(wrapped))

    def item_keys_for(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, ItemKey]:
        wanted = sorted(set(memory_ids))
        if not wanted:
            return {}
        condition, params = self._sql.any_of("memory_id", wanted)
        rows = self._db.query(f"{self._sql.ITEM_KEYS_OF} AND {condition}", (tenant_id, *params))
        return {m: ItemKey(tenant_id, m, s, bytes(k), bytes(w)) for m, s, k, w in rows}

    def item_keys(self, limit: int | None = None) -> Iterator[ItemKey]:
        rows = self._db.query(
            self._sql.ITEM_KEYS, (self._sql.EVERY_ROW if limit is None else limit,)
        )
        return (ItemKey(t, m, s, bytes(k), bytes(w)) for t, m, s, k, w in rows)

    # -- the log --------------------------------------------------------------------------

    def idempotency(self, tenant_id: str, credential: str, key: str) -> IdempotencyRecord | None:
        rows = self._db.query(self._sql.GET_IDEMPOTENCY, (tenant_id, credential, key))
        return idempotency_from_row(tenant_id, credential, key, rows[0]) if rows else None

    def idempotency_records(
        self, after: tuple[str, str, str] | None, limit: int
    ) -> list[IdempotencyRecord]:
        rows = self._db.query(self._sql.IDEMPOTENCY_PAGE, (*(after or ("", "", "")), limit))
        return [idempotency_from_row(t, c, k, rest) for t, c, k, *rest in rows]

    def events_after(self, tenant_id: str | None, after: int, limit: int) -> list[StoredEvent]:
        if tenant_id is None:
            rows = self._db.query(self._sql.EVENTS_AFTER, (after, limit))
        else:
            rows = self._db.query(self._sql.TENANT_EVENTS_AFTER, (tenant_id, after, limit))
        return [stored_event_from_row(row) for row in rows]

    def events_before(self, tenant_id: str, before: int | None, limit: int) -> list[StoredEvent]:
        below = NEWEST if before is None else before
        rows = self._db.query(self._sql.TENANT_EVENTS_BEFORE, (tenant_id, below, limit))
        return [stored_event_from_row(row) for row in rows]

    def memory_events(self, tenant_id: str, memory_id: str, subject_id: str) -> list[StoredEvent]:
        rows = self._db.query(
            self._sql.MEMORY_EVENTS, (tenant_id, memory_id, tenant_id, subject_id)
        )
        return [stored_event_from_row(row) for row in rows]

    def chain_links(self, tenant_id: str | None, after: int, limit: int) -> list[ChainLink]:
        if tenant_id is None:
            rows = self._db.query(self._sql.CHAIN_AFTER, (after, limit))
        else:
            rows = self._db.query(self._sql.TENANT_CHAIN_AFTER, (tenant_id, after, limit))
        return [link_from_row(row) for row in rows]

    def tenants(self) -> list[str]:
        return [row[0] for row in self._db.query(self._sql.TENANTS)]

    def tenant_events(self, tenant_id: str) -> Iterator[StoredEvent]:
        return paged_events(self.events_after, tenant_id)

    def head(self) -> int:
        (position,) = self._db.query(self._sql.HEAD)[0]
        return int(position)

    def schema_version(self) -> int:
        """The highest migration applied."""
        (version,) = self._db.query(self._sql.SCHEMA_VERSION)[0]
        return int(version)

    # -- facts about the store ------------------------------------------------------------

    def meta(self, name: str) -> str | None:
        rows = self._db.query(self._sql.GET_META, (name,))
        return str(rows[0][0]) if rows else None

    def claim_meta(self, name: str, value: str) -> str:
        self._db.write(self._sql.CLAIM_META, (name, value))
        stored = self.meta(name)
        assert stored is not None  # claimed now, or by whoever was first
        return stored

    def replace_meta(self, name: str, value: str) -> None:
        self._db.write(self._sql.REPLACE_META, (name, value))

    # -- API keys -------------------------------------------------------------------------

    def add_api_key(self, key: ApiKey) -> None:
        self._db.write(self._sql.INSERT_API_KEY, api_key_row(key))

    def api_key(self, key_id: str, *, wait: bool = True) -> ApiKey | None:
        rows = self._db.query(self._sql.GET_API_KEY, (key_id,), wait=wait)
        if not rows:
            return None
        row = tuple(rows[0])
        key = self._decoded_keys.get(row)
        if key is None:
            key = api_key_from_row(row)
            if len(self._decoded_keys) >= DECODED_KEYS_KEPT:
                self._decoded_keys.clear()
            self._decoded_keys[row] = key
        return key

    def api_keys(self, tenant_id: str | None = None) -> list[ApiKey]:
        sql = self._sql.API_KEY_SELECT
        params: tuple[str, ...] = ()
        if tenant_id is not None:
            sql += f" WHERE tenant_id = {self._sql.P}"
            params = (tenant_id,)
        rows = self._db.query(sql + " ORDER BY tenant_id, created_at, key_id", params)
        return [api_key_from_row(row) for row in rows]

    def revoke_api_key(self, key_id: str, at: datetime) -> bool:
        return bool(self._db.write(self._sql.REVOKE_API_KEY, (to_micros(at), key_id)))

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        micros = to_micros(at)
        self._db.write(self._sql.TOUCH_API_KEY, (micros, key_id, micros))


__all__ = ["Database", "Dialect", "SQLReads"]
