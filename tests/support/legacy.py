"""Items as the service wrote them before items had keys of their own ("legacy" items),
and event rows as SQLite stored them before the compact form (migration 12).

Such an item's content is sealed directly under its subject's key (blob format 1, not
padded) and it has no row in ``item_keys``. Stores upgraded from that time hold them; the
tests make them the way the service then did, through the store, to check that they still
open and how erase and retention treat them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from governed_memory.analysis import Analyzer
from governed_memory.codec import EVENT_COLUMNS, canonical_columns
from governed_memory.core import lifecycle
from governed_memory.core.commands import WriteMemory
from governed_memory.core.lifecycle import UNSEALED, Context, SealedContent
from governed_memory.core.model import ItemState, Principal
from governed_memory.crypto import SUBJECT_BLOB
from governed_memory.records import Batch
from governed_memory.service import MemoryService
from governed_memory.service._support import changes, new_id
from governed_memory.service.vault import Vault


def write_legacy(
    service: MemoryService, principal: Principal, request: dict[str, Any]
) -> ItemState:
    """Create or rewrite an item with its content sealed under its subject's key (format 1)."""
    command = WriteMemory.parse(request)
    assert command.memory_id is not None
    store, keyring, memory_id = service.store, service.keyring, command.memory_id
    tenant = principal.tenant_id
    vault = Vault(store, keyring)
    current = store.get(tenant, memory_id)
    ctx = Context(
        now=service.clock.now(), principal=principal, new_id=new_id, policy=service.policy
    )
    events = lifecycle.decide_write(ctx, command, memory_id, UNSEALED, current, None)
    subject = vault.subject_key_or_new(tenant, command.subject_id)
    key = keyring.subject_sealing_key(subject, memory_id)
    blob = keyring.seal(key, command.expected_version + 1, command.content.encode("utf-8"))
    assert blob[0] == SUBJECT_BLOB
    tokens = service.tokenizer.count(command.content)
    events = lifecycle.with_content(
        events, SealedContent(blob, keyring.content_hash(key, command.content), tokens)
    )
    index = vault.index_doc(tenant, Analyzer(), command.content)
    rows = changes(events, {memory_id: current}, {memory_id: lambda item: index})
    store.commit(Batch(tenant, events, rows, require_key=subject))
    state = store.get(tenant, memory_id)
    assert state is not None
    return state


def canonical_event_rows(path: Path) -> int:
    """Rewrite the compact event rows of the SQLite store at ``path`` into the canonical
    form, and put the content of the items that take it from those events back in their
    rows, as a store written before migration 12 holds them (the log's append-only
    trigger set aside meanwhile, then put back). How many event rows it rewrote."""
    with _log_opened(path) as conn:
        conn.execute(  # items held their content in their rows then
            "UPDATE memories SET content = (SELECT e.content FROM events AS e "
            "WHERE e.tenant_id = memories.tenant_id AND e.memory_id = memories.id "
            "AND e.version = memories.content_version AND e.type = 'memory.written') "
            "WHERE content = x''"
        )
        return _canonical(conn, "content IS NOT NULL", ())


def canonical_event_row(path: Path, tenant_id: str, memory_id: str, version: int) -> int:
    """Rewrite one compact ``memory.written`` row into the canonical form and nothing else
    (an item row taking its content from it is left so): how many rows it rewrote."""
    with _log_opened(path) as conn:
        return _canonical(
            conn,
            "content IS NOT NULL AND tenant_id = ? AND memory_id = ? AND version = ?",
            (tenant_id, memory_id, version),
        )


@contextmanager
def _log_opened(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to the store at ``path`` with the log's append-only trigger set aside,
    committed and put back at the end."""
    conn = sqlite3.connect(path)
    try:
        (trigger,) = conn.execute(
            "SELECT sql FROM sqlite_schema WHERE name = 'events_refuse_update'"
        ).fetchone()
        conn.execute("DROP TRIGGER events_refuse_update")
        yield conn
        conn.execute(trigger)
        conn.commit()
    finally:
        conn.close()


def _canonical(conn: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> int:
    """Rewrite the event rows ``where`` selects into the canonical form."""
    columns = ", ".join(EVENT_COLUMNS)  # the codec's constant names: no input
    rows = conn.execute(
        f"SELECT position, {columns}, content, content_hash FROM events WHERE {where}",  # noqa: S608
        params,
    ).fetchall()
    for position, *stored in rows:
        payload = canonical_columns(tuple(stored))[-1]
        conn.execute(
            "UPDATE events SET payload = ?, content = NULL, content_hash = NULL WHERE position = ?",
            (payload, position),
        )
    return len(rows)
