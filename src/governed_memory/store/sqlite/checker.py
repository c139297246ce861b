"""A worker process checking tenants against their logs for a rebuild (started and fed
by :mod:`.intact`, which tells what *intact* means and how the rebuild uses the answers).

A worker reads through APSW, not the standard library's ``sqlite3``: the check is mostly
rows turned into Python values, millions of them, and the standard module (3.11) gives up
the interpreter's lock and takes it back around every column it reads, which APSW does
not; its rows cost about half as much (``docs/benchmarks.md``, item 1, *fifteenth
pass*). Its SQLite is its own copy, so a worker opens the database through APSW only and
never imports ``sqlite3``: two copies of SQLite in one process must not open one file
(closing either's descriptor would drop the other's POSIX locks). Both read the same file
format, write-ahead log and shared-memory index.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import apsw

from governed_memory.codec import (
    EVENT_COLUMNS,
    ITEM_COLUMNS,
    SPLIT_COLUMNS,
    stored_event_from_row,
)
from governed_memory.core.events import Event, MemoryWritten
from governed_memory.core.model import ItemState
from governed_memory.core.projection import replay
from governed_memory.core.values import Status
from governed_memory.records import ItemChange
from governed_memory.store.paging import EVENT_PAGE
from governed_memory.store.rebuild_diff import COMPARED_ITEMS, diff
from governed_memory.store.sqlite import sql
from governed_memory.store.sqlite.held import Held, Reader, stored_rows, tenant_rows
from governed_memory.store.sqlite.index_rows import document_row

#: How long a worker's read waits for a lock (only WAL recovery takes one from readers).
BUSY_TIMEOUT_MS = 10_000
#: How much of the database file a worker reads through a memory map, at most (the rest
#: is read as usual): 2 GiB less 64 KiB, the standard ``sqlite3`` module's SQLite's limit,
#: which APSW's build does not have. A tenant's rows lie on pages spread over the file, read
#: once each: through the map, a page costs no system call and no copy. The map is
#: read-only, so a fault (an I/O error raises SIGBUS) can end a worker, never write to the
#: file, and a worker that dies leaves the work to the rebuild. A worker's resident size
#: then counts the file's pages it has read (a peak of 236 MiB checking 500 tenants of a
#: 206 MiB store, against 28 without the map): the OS page cache's pages, clean and
#: shared, which ``pread`` fills too; what the worker allocates stays ~15 MiB.
MMAP_BYTES = 0x7FFF0000
#: How a worker opens the database: read only, by URI (for ``mode=ro``), and without the
#: connection's mutex. SQLite's default (serialized) takes that mutex on every step and
#: every column read, about 200 times an event checked; a worker reads on one thread,
#: its one connection at a time, which is all SQLite's multi-thread mode asks. (3.2 % of
#: a worker's instructions, ``docs/benchmarks.md`` item 1, *sixteenth pass*.)
OPEN_FLAGS = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI | apsw.SQLITE_OPEN_NOMUTEX
#: Where a TENANT_EVENTS_AFTER row holds a compact event's sealed content (``NULL`` in a row
#: of the canonical form), and where an item's row holds its content and content version.
_EVENT_CONTENT = 1 + len(EVENT_COLUMNS) + SPLIT_COLUMNS.index("content")
_ITEM_CONTENT = ITEM_COLUMNS.index("content")
_ITEM_CONTENT_VERSION = ITEM_COLUMNS.index("content_version")
#: What an item row's x'' becomes where the log does not hold its content for it: equal to
#: nothing, so that row differs from the folded one, whatever the fold holds.
_UNRESOLVED = object()


def check_share(path: str, tenants: Sequence[str]) -> list[tuple[str, int, int, int, int]]:
    """In a worker process: (tenant, through, events, items, active) of each intact tenant
    of ``tenants``, each checked in one snapshot on a read-only connection."""
    gc.disable()  # short-lived, and its millions of tuples form no cycles
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    conn = apsw.Connection(uri, flags=OPEN_FLAGS)
    try:
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        found = []
        for tenant in tenants:
            conn.execute("BEGIN")
            try:
                intact = _intact(conn, tenant)
            finally:
                conn.execute("COMMIT")  # read only: ends the snapshot
            if intact is not None:
                found.append((tenant, *intact))
        return found
    finally:
        conn.close()


def _intact(conn: Reader, tenant: str) -> tuple[int, int, int, int] | None:
    """(through, events, items, active) if the tenant is intact, else ``None``."""
    (count,) = conn.execute(sql.TENANT_ITEM_COUNT, (tenant,)).fetchone()
    if count > COMPARED_ITEMS:
        return None
    rows, documents = tenant_rows(conn, tenant, sql.REBUILD_ITEMS_AS_STORED)
    if not rows:
        return None  # nothing to compare: an empty projection (gmem import) is loaded
    held = Held(conn, 0, 0, rows, documents)
    read = _Read()
    items = replay(_events(conn, tenant, read)).values()
    if not read.events:
        return None
    _resolve_contents(rows, items, read.compact)
    entries = held.entries()
    changes = []
    active = 0
    for item in items:
        if item.id not in rows:
            return None  # a row to write
        index = None
        if item.status is Status.ACTIVE:
            found = entries.get(item.id)
            if (
                found is None
                or found.content_version != item.content_version
                or found.content_hash != item.content_hash
            ):
                return None  # content to open and index again
            index = found.entry
            active += 1
        changes.append(ItemChange(item, 0, index))
    stored = stored_rows(conn, tenant, [], held)
    needed = {(c.item.agent_id, c.item.purpose) for c in changes if c.index is not None}
    if not needed.issubset(stored.scopes):
        return None  # a scope to create
    if not diff(changes, stored, _no_new_rows, document_row).nothing():
        return None
    return read.through, read.events, len(changes), active


class _Read:
    """How much of a tenant's log :func:`_events` read, the last position, and the version
    of each item's last ``memory.written`` event stored in the compact form (the one an
    item's row may point at for its content)."""

    def __init__(self) -> None:
        self.events = 0
        self.through = 0
        self.compact: dict[str, int] = {}


def _events(conn: Reader, tenant: str, read: _Read) -> Iterator[Event]:
    """The tenant's log, in position order, a page at a time (folded as it is read: only
    a page of it is held), counted in ``read``."""
    compact = read.compact
    while True:
        page = conn.execute(sql.TENANT_EVENTS_AFTER, (tenant, read.through, EVENT_PAGE))
        rows = page.fetchall()
        for row in rows:
            stored = stored_event_from_row(row)
            read.events += 1
            read.through = stored.position
            event = stored.event
            if row[_EVENT_CONTENT] is not None and isinstance(event, MemoryWritten):
                compact[event.memory_id] = event.version  # the row is of the compact form
            yield event
        if len(rows) < EVENT_PAGE:
            return


def _resolve_contents(
    rows: dict[str, tuple[int, tuple[Any, ...]]],
    items: Iterable[ItemState],
    compact: Mapping[str, int],
) -> None:
    """Put in ``rows`` (read with each content as stored) the content that the store's
    reads give an item's row storing x'': that of the compact ``memory.written`` event of
    its item at its content version (``sql.ITEM_CONTENT``). The folded item's content is
    that of its last ``memory.written`` event, whose version is its content version; so
    where that event is the compact one of the row's content version, the row's content
    is the folded content. Any other x'' (the store reads NULL from an event of the
    canonical form, or another version's bytes, or content the fold destroyed) becomes
    :data:`_UNRESOLVED`: the row differs, and the tenant is left to the rebuild."""
    for item in items:
        found = rows.get(item.id)
        if found is None or found[1][_ITEM_CONTENT] != b"":
            continue
        rowid, row = found
        resolved = (
            item.content
            if item.content is not None
            and row[_ITEM_CONTENT_VERSION] == item.content_version
            and compact.get(item.id) == item.content_version
            else _UNRESOLVED
        )
        rows[item.id] = (rowid, (*row[:_ITEM_CONTENT], resolved, *row[_ITEM_CONTENT + 1 :]))


def _no_new_rows(count: int) -> list[int]:
    """Row ids for new items: a tenant checked here has none (it is not intact)."""
    assert count == 0, "an item without a row reached the comparison"
    return []


def main(argv: Sequence[str]) -> None:
    """A worker: for each line of standard input (a JSON list of tenants), one line of
    standard output (a JSON list of the intact ones, as :func:`check_share` gives them);
    at the end of its input it ends the process (the worker's command runs nothing else)."""
    (path,) = argv
    for line in sys.stdin:
        print(json.dumps(check_share(path, json.loads(line))), flush=True)
    # Its input closed, every answer written and flushed, its connections closed: end
    # without the interpreter's teardown (freeing what it read, ~15 ms the rebuild waits).
    os._exit(0)


__all__ = ["BUSY_TIMEOUT_MS", "MMAP_BYTES", "OPEN_FLAGS", "check_share", "main"]
