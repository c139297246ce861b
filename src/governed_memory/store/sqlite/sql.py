"""The SQL of the SQLite store: every value travels as a ``?`` parameter.

The reads here satisfy :class:`governed_memory.store.sql_reads.Dialect`; the rest are the
statements of :mod:`.batch`, :mod:`.search`, :mod:`.top_k` and :mod:`.bulk`.
PostgreSQL's counterpart is ``store/postgres/sql.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from governed_memory.codec import API_KEY_COLUMNS, EVENT_COLUMNS, ITEM_COLUMNS, SPLIT_COLUMNS

P = "?"
EVERY_ROW: int | None = -1  # LIMIT -1 reads every row


def marks(count: int) -> str:
    """``count`` placeholders, comma-separated."""
    return ", ".join("?" for _ in range(count))


def any_of(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """``column IN (?, …)``; an empty list matches nothing (``IN (NULL)``)."""
    return f"{column} IN ({marks(len(values)) or 'NULL'})", list(values)


COLUMNS = ", ".join(ITEM_COLUMNS)
# Events are read with their split columns (codec.SPLIT_COLUMNS: NULL in a row of the
# canonical form, written before migration 12) and written in the compact form.
_STORED_EVENT = ", ".join((*EVENT_COLUMNS, *SPLIT_COLUMNS))
EVENT_SELECT = f"SELECT position, {_STORED_EVENT} FROM events"

# -- reads ----------------------------------------------------------------------------------

# An item's sealed content is held once: in the compact memory.written event that wrote
# its content version when that event holds the very same bytes (then the item's row has
# the empty blob, x'', in its place), else in the row (NULL once destroyed). Every read of
# an item takes it from the event through events_by_memory; every write of an item's row
# stores x'' only after finding the same bytes in that event, so the two cannot differ.
ITEM_CONTENT = (
    "CASE m.content WHEN x'' THEN (SELECT e.content FROM events AS e "
    "WHERE e.tenant_id = m.tenant_id AND e.memory_id = m.id AND e.version = m.content_version "
    "AND e.type = 'memory.written') ELSE m.content END"
)
ITEM_READ = ", ".join(ITEM_CONTENT if c == "content" else f"m.{c}" for c in ITEM_COLUMNS)
ITEM_SELECT = f"SELECT {ITEM_READ} FROM memories AS m"


def stored_content(tenant: int, memory: int, content: int, version: int) -> str:
    """What a write of an item's row stores as its content, given the numbers of the
    parameters holding its tenant, id, sealed content and content version: x'' when the
    compact event of that content version holds the same bytes, else the content."""
    return (
        f"CASE WHEN EXISTS (SELECT 1 FROM events AS e WHERE e.tenant_id = ?{tenant} "
        f"AND e.memory_id = ?{memory} AND e.version = ?{version} "
        f"AND e.type = 'memory.written' AND e.content = ?{content}) THEN x'' ELSE ?{content} END"
    )


def _item_values(first: int) -> list[str]:
    """The numbered parameters of ITEM_COLUMNS from ``?first`` on, content as stored."""
    number = {c: first + i for i, c in enumerate(ITEM_COLUMNS)}
    content = stored_content(
        number["tenant_id"], number["id"], number["content"], number["content_version"]
    )
    return [content if c == "content" else f"?{number[c]}" for c in ITEM_COLUMNS]


# A write's two reads in one statement: the subject's key and the item's row (each NULL
# when absent), joined to a one-row table so that the row always exists.
WRITE_STATE = (
    "SELECT k.key_id, k.wrapped, " + ITEM_READ + " FROM (SELECT 1) AS one "
    "LEFT JOIN subject_keys AS k ON k.tenant_id = ? AND k.subject_id = ? "
    "LEFT JOIN memories AS m ON m.tenant_id = ? AND m.id = ?"
)
GET_ITEM = ITEM_SELECT + " WHERE tenant_id = ? AND id = ?"
SUBJECT_ITEMS = ITEM_SELECT + " WHERE tenant_id = ? AND subject_id = ? ORDER BY id"
TENANT_ITEMS = ITEM_SELECT + " WHERE tenant_id = ? ORDER BY id"
DUE_FOR_EXPIRY = (
    ITEM_SELECT + " WHERE status IN ('active', 'quarantined') AND expires_at <= ? "
    "ORDER BY expires_at LIMIT ?"
)
QUARANTINE = ITEM_SELECT + " WHERE tenant_id = ? AND status = 'quarantined'"
# Items still holding content in a status that has a retention window (the partial index
# memories_retention); sql_reads adds each (kind, status) cutoff and the cursor.
DUE_FOR_RETENTION = (
    ITEM_SELECT + " WHERE content IS NOT NULL AND status IN ('expired', 'rejected', 'superseded')"
)
GET_ITEM_KEY = (
    "SELECT subject_id, key_id, wrapped FROM item_keys WHERE tenant_id = ? AND memory_id = ?"
)
ITEM_KEYS_OF = "SELECT memory_id, subject_id, key_id, wrapped FROM item_keys WHERE tenant_id = ?"
ITEM_KEYS = (
    "SELECT tenant_id, memory_id, subject_id, key_id, wrapped FROM item_keys "
    "ORDER BY tenant_id, memory_id LIMIT ?"
)
GET_VERSION = "SELECT version FROM memories WHERE tenant_id = ? AND id = ?"
GET_KEY_ID = "SELECT key_id FROM subject_keys WHERE tenant_id = ? AND subject_id = ?"
GET_SUBJECT_KEY = "SELECT key_id, wrapped FROM subject_keys WHERE tenant_id = ? AND subject_id = ?"
SUBJECT_KEYS_OF = "SELECT subject_id, key_id, wrapped FROM subject_keys WHERE tenant_id = ?"
SUBJECT_KEYS = (
    "SELECT tenant_id, subject_id, key_id, wrapped FROM subject_keys "
    "ORDER BY tenant_id, subject_id LIMIT ?"
)
GET_IDEMPOTENCY = (
    "SELECT fingerprint, result, position FROM idempotency "
    "WHERE tenant_id = ? AND credential = ? AND key = ?"
)
#: Idempotency records after a (tenant, credential, key), in that order: an export's pages.
IDEMPOTENCY_PAGE = (
    "SELECT tenant_id, credential, key, fingerprint, result, position FROM idempotency "
    "WHERE (tenant_id, credential, key) > (?, ?, ?) ORDER BY tenant_id, credential, key LIMIT ?"
)
EVENTS_AFTER = EVENT_SELECT + " WHERE position > ? ORDER BY position LIMIT ?"
TENANT_EVENTS_AFTER = (
    EVENT_SELECT + " WHERE tenant_id = ? AND position > ? ORDER BY position LIMIT ?"
)
TENANT_EVENTS_BEFORE = (
    EVENT_SELECT + " WHERE tenant_id = ? AND position < ? ORDER BY position DESC LIMIT ?"
)
MEMORY_EVENTS = (
    f"{EVENT_SELECT} WHERE tenant_id = ? AND memory_id = ? "
    f"UNION ALL {EVENT_SELECT} WHERE tenant_id = ? "
    "AND subject_id = ? AND type = 'subject.forgotten' ORDER BY position"
)
# The hash chain (store/chain_links.py): stored events with their hashes, and a head.
CHAIN_SELECT = f"SELECT position, {_STORED_EVENT}, prev_hash, hash FROM events"
CHAIN_AFTER = CHAIN_SELECT + " WHERE position > ? ORDER BY position LIMIT ?"
TENANT_CHAIN_AFTER = (
    CHAIN_SELECT + " WHERE tenant_id = ? AND position > ? ORDER BY position LIMIT ?"
)
TENANT_HEAD_HASH = "SELECT hash FROM events WHERE tenant_id = ? ORDER BY position DESC LIMIT 1"
# Migration 8 links the events stored before the chain (chain_links.fill): all of them of
# the canonical form, and read before migration 12 adds the split columns.
UNCHAINED_EVENTS = "SELECT position, " + ", ".join(EVENT_COLUMNS) + " FROM events ORDER BY position"
SET_CHAIN = "UPDATE events SET prev_hash = ?, hash = ? WHERE position = ?"
TENANTS = "SELECT DISTINCT tenant_id FROM events ORDER BY tenant_id"
HEAD = "SELECT coalesce(max(position), 0) FROM events"
TENANT_HEAD = "SELECT coalesce(max(position), 0) FROM events WHERE tenant_id = ?"
SCHEMA_VERSION = "SELECT coalesce(max(version), 0) FROM schema_migrations"
PING = "SELECT 1 FROM schema_migrations LIMIT 1"
API_KEY_SELECT = f"SELECT {', '.join(API_KEY_COLUMNS)} FROM api_keys"
GET_API_KEY = API_KEY_SELECT + " WHERE key_id = ?"

# -- writes ---------------------------------------------------------------------------------

INSERT_API_KEY = (
    f"INSERT INTO api_keys ({', '.join(API_KEY_COLUMNS)}) VALUES ({marks(len(API_KEY_COLUMNS))})"
)
GET_META = "SELECT value FROM store_meta WHERE name = ?"
# A batch's two checks read at once (the index it was made for, its subject's key), with
# its tenant's chain head (TENANT_HEAD_HASH), which its first event is linked to.
INDEX_KEY_AND_HEAD = (
    "SELECT (SELECT value FROM store_meta WHERE name = ?), "
    "(SELECT key_id FROM subject_keys WHERE tenant_id = ? AND subject_id = ?), "
    f"({TENANT_HEAD_HASH})"
)
CLAIM_META = "INSERT INTO store_meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING"
REPLACE_META = (
    "INSERT INTO store_meta (name, value) VALUES (?, ?) "
    "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
)
DELETE_META = "DELETE FROM store_meta WHERE name = ?"
REVOKE_API_KEY = (
    "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE key_id = ? RETURNING key_id"
)
TOUCH_API_KEY = (
    "UPDATE api_keys SET last_used_at = ? WHERE key_id = ? "
    "AND (last_used_at IS NULL OR last_used_at < ?) RETURNING key_id"
)
INSERT_SUBJECT_KEY = (
    "INSERT INTO subject_keys (tenant_id, subject_id, key_id, wrapped) "
    "VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, subject_id) DO NOTHING"
)
DESTROY_KEY = "DELETE FROM subject_keys WHERE tenant_id = ? AND subject_id = ?"
INSERT_ITEM_KEY = (
    "INSERT INTO item_keys (tenant_id, memory_id, subject_id, key_id, wrapped) "
    "VALUES (?, ?, ?, ?, ?)"
)
DESTROY_ITEM_KEY = "DELETE FROM item_keys WHERE tenant_id = ? AND memory_id = ?"
DESTROY_ITEM_KEYS = "DELETE FROM item_keys WHERE tenant_id = ? AND subject_id = ?"
SUBJECT_LEFT = (
    "SELECT 1 FROM memories WHERE tenant_id = ? AND subject_id = ? AND status != 'deleted' LIMIT 1"
)
_EVENT_MARKS = marks(len(EVENT_COLUMNS) + len(SPLIT_COLUMNS) + 2)
INSERT_EVENT = (
    f"INSERT INTO events ({_STORED_EVENT}, prev_hash, hash) "
    f"VALUES ({_EVENT_MARKS}) RETURNING position"
)
IMPORT_EVENT = (
    f"INSERT INTO events (position, {_STORED_EVENT}, prev_hash, hash) VALUES (?, {_EVENT_MARKS})"
)
INSERT_IDEMPOTENCY = (
    "INSERT INTO idempotency (tenant_id, credential, key, fingerprint, result, position) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
# A new item is a plain INSERT: the unique (tenant_id, id) refuses it when the id exists.
# A change is an UPDATE guarded by the version it was decided on; matching no row fails.
INSERT_ITEM = (
    f"INSERT INTO memories ({COLUMNS}) VALUES ({', '.join(_item_values(1))}) RETURNING rowid"
)
# Parameters: ITEM_COLUMNS (the row as item_row makes it), then the version it was decided on.
UPDATE_ITEM = (
    "UPDATE memories SET "
    + ", ".join(
        f"{c} = {v}"
        for c, v in zip(ITEM_COLUMNS, _item_values(1), strict=True)
        if c not in ("tenant_id", "id")
    )
    + f" WHERE tenant_id = ?1 AND id = ?2 AND version = ?{len(ITEM_COLUMNS) + 1} RETURNING rowid"
)

# -- the search index -----------------------------------------------------------------------

INSERT_SCOPE = (
    "INSERT INTO scopes (tenant_id, agent_id, purpose) VALUES (?, ?, ?) "
    "ON CONFLICT (tenant_id, agent_id, purpose) DO NOTHING"
)
GET_SCOPE_ID = "SELECT id FROM scopes WHERE tenant_id = ? AND agent_id = ? AND purpose = ?"
OLD_DOCUMENT = "SELECT scope, length, terms, tfs FROM search_docs WHERE item = ?"
DELETE_POSTING = "DELETE FROM postings WHERE scope = ? AND term = ? AND impact = ? AND item = ?"
# The fallback when the document and the exact keys disagree: a scan of the scope.
DELETE_ITEM_POSTINGS = "DELETE FROM postings WHERE scope = ? AND item = ?"
DELETE_DOCUMENT = "DELETE FROM search_docs WHERE item = ?"
INSERT_POSTING = "INSERT INTO postings (scope, term, impact, item) VALUES (?, ?, ?, ?)"
INSERT_DOCUMENT = (
    "INSERT INTO search_docs (item, scope, length, confidence, updated_at, expires_at, kind, "
    "terms, tfs) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_VECTOR = "INSERT INTO search_vectors (item, scope, vector) VALUES (?, ?, ?)"
DELETE_VECTOR = "DELETE FROM search_vectors WHERE item = ?"
# Every change to a scope's postings bumps its generation, which invalidates the cached
# document frequencies of its terms (see search.py).
DOCUMENT_REMOVED = (
    "UPDATE scopes SET documents = documents - 1, total_length = total_length - ?, "
    "generation = generation + 1 WHERE id = ?"
)
DOCUMENT_ADDED = (
    "UPDATE scopes SET documents = documents + 1, total_length = total_length + ?, "
    "generation = generation + 1 WHERE id = ?"
)

# -- search (see search.py and top_k.py) ----------------------------------------------------

# The scope and the index's recorded signature, in one row: a search made for another
# index is refused before anything else is read (without a scope there is nothing to find,
# whatever the index was built with).
SCOPE = (
    "SELECT id, documents, total_length, generation, "
    "(SELECT value FROM store_meta WHERE name = ?) FROM scopes "
    "WHERE tenant_id = ? AND agent_id = ? AND purpose = ?"
)
DOCUMENT_FREQUENCY = "SELECT count(*) FROM postings WHERE scope = ? AND term = ?"
#: What ranking needs of an item, from its document (store/impact.py, top_k.py).
DOCUMENT_FACTS = "length, confidence, updated_at, expires_at, kind, terms, tfs"


def few_postings(terms: int) -> str:
    """Every posting of ``terms`` query terms in a scope, up to a limit, each with its
    item's confidence, last change, expiry and kind; parameters: the scope, the terms,
    the limit, the scope again. The documents are read through the scope's entries of
    ``search_docs_by_scope`` (together in a few pages), not by each item's rowid (a random
    page of the table for each posting)."""
    return (
        "WITH p AS (SELECT term, item, impact FROM postings "
        f"WHERE scope = ? AND term IN ({marks(terms)}) LIMIT ?) "
        "SELECT p.term, p.item, p.impact, d.confidence, d.updated_at, d.expires_at, d.kind "
        "FROM p JOIN search_docs AS d INDEXED BY search_docs_by_scope "
        "ON d.scope = ? AND d.item = p.item"
    )


# A page of one term's postings, best first, after the last one read (keyset paging over
# the primary key: no posting is scored or sorted to find the best ones).
FIRST_POSTINGS = (
    "SELECT impact, item FROM postings WHERE scope = ? AND term = ? "
    "ORDER BY impact DESC, item DESC LIMIT ?"
)
# A list's head down to a cutoff, and the part of it below a head already read
# (heads.py): the same order, so a head read in parts is the head read at once.
HEAD_POSTINGS = (
    "SELECT impact, item FROM postings WHERE scope = ? AND term = ? AND impact >= ? "
    "ORDER BY impact DESC, item DESC"
)
BELOW_HEAD_POSTINGS = (
    "SELECT impact, item FROM postings WHERE scope = ? AND term = ? AND impact < ? "
    "AND impact >= ? ORDER BY impact DESC, item DESC"
)
NEXT_POSTINGS = (
    "SELECT impact, item FROM postings WHERE scope = ? AND term = ? AND (impact, item) < (?, ?) "
    "ORDER BY impact DESC, item DESC LIMIT ?"
)


# A term's postings per tf ≥ 2 (an index range) with the best of each, and the best of
# tf = 1 (one descent): the tiers of its list (threshold.py).
TIERS = (
    "SELECT impact >> 16, count(*), max(impact) FROM postings "
    "WHERE scope = ? AND term = ? AND impact >= 131072 GROUP BY 1 "
    "UNION ALL SELECT 1, 0, max(impact) FROM postings "
    "WHERE scope = ? AND term = ? AND impact < 131072"
)


def documents(items: int) -> str:
    """The documents of ``items`` items: what ranking needs of each."""
    return f"SELECT item, {DOCUMENT_FACTS} FROM search_docs WHERE item IN ({marks(items)})"


# The sealed vectors of a scope's items under every hard filter (store.sql_reads appends
# the subject and kinds filters).
SCOPE_VECTORS = (
    "SELECT m.id, m.subject_id, m.content_version, v.vector, m.confidence, m.updated_at, "
    "m.tokens FROM search_vectors AS v JOIN memories AS m ON m.rowid = v.item "
    "WHERE v.scope = (SELECT id FROM scopes WHERE tenant_id = ? AND agent_id = ? "
    "AND purpose = ?) AND m.tenant_id = ? AND m.agent_id = ? AND m.purpose = ? "
    "AND m.status = 'active' AND m.expires_at > ?"
)
SUBJECT_ROWIDS = (
    "SELECT rowid FROM memories WHERE tenant_id = ? AND subject_id = ? "
    "AND agent_id = ? AND purpose = ? AND status = 'active'"
)


def items_of_terms(terms: int) -> str:
    """The items of a scope holding any of ``terms`` query terms."""
    return f"SELECT DISTINCT item FROM postings WHERE scope = ? AND term IN ({marks(terms)})"


_FOUND_KEYS = (
    "sk.key_id, sk.wrapped, ik.subject_id, ik.key_id, ik.wrapped "
    "FROM memories AS m LEFT JOIN subject_keys AS sk "
    "ON sk.tenant_id = m.tenant_id AND sk.subject_id = m.subject_id "
    "LEFT JOIN item_keys AS ik ON ik.tenant_id = m.tenant_id AND ik.memory_id = m.id "
)


def found_rows(items: int) -> str:
    """The rows of ``items`` of a tenant by memory id, each with its subject's key and its
    own (store/found.py): a search's candidates, read in the state of its matches."""
    return f"SELECT {ITEM_READ}, {_FOUND_KEYS}WHERE m.tenant_id = ? AND m.id IN ({marks(items)})"


#: What :func:`eligible_items` reads of an item, before its row and keys (``with_rows``).
ELIGIBLE_COLUMNS = 5


def eligible_items(items: int, with_rows: bool = False) -> str:
    """Which of ``items`` rowids pass the hard filters (more ``AND m.…`` may be appended);
    ``with_rows``, each followed by its row and keys as :func:`found_rows` reads them."""
    columns = "m.rowid, m.id, m.confidence, m.updated_at, m.tokens"
    if with_rows:
        columns = f"{columns}, {ITEM_READ}, {_FOUND_KEYS}"
    else:
        columns = f"{columns} FROM memories AS m "
    return (
        f"SELECT {columns}"
        # The unary + keeps the planner on rowid lookups: the scope's items are
        # known, and a tenant-wide index would read every item of the tenant.
        f"WHERE m.rowid IN ({marks(items)}) AND +m.tenant_id = ? AND +m.agent_id = ? "
        "AND +m.purpose = ? AND +m.status = 'active' AND +m.expires_at > ?"
    )


# -- rebuild --------------------------------------------------------------------------------

# What a tenant's rows hold, read by a rebuild to write only what differs (bulk.py).
REBUILD_SCOPES = (
    "SELECT id, agent_id, purpose, documents, total_length FROM scopes WHERE tenant_id = ?"
)
REBUILD_ITEMS = f"SELECT m.rowid, {ITEM_READ} FROM memories AS m WHERE m.tenant_id = ?"
# The same rows with each content as the row stores it: x'' where the compact event of its
# content version holds it (ITEM_CONTENT), left for a reader that has that event in hand.
REBUILD_ITEMS_AS_STORED = f"SELECT rowid, {COLUMNS} FROM memories WHERE tenant_id = ?"
TENANT_ITEM_COUNT = "SELECT count(*) FROM memories WHERE tenant_id = ?"
ANY_ITEM = "SELECT 1 FROM memories LIMIT 1"
REBUILD_DOCUMENTS = (
    "SELECT d.item, d.scope, d.length, d.confidence, d.updated_at, d.expires_at, d.kind, "
    "d.terms, d.tfs FROM memories AS m JOIN search_docs AS d ON d.item = m.rowid "
    "WHERE m.tenant_id = ?"
)


#: A scope's postings packed (rebuild_diff.Packed): (term, impact << 31 | item), the
#: second NULL for an item or impact outside the ranges that keep the packing exact.
PACKED_POSTINGS = (
    "SELECT term, CASE WHEN item >= 0 AND item < 2147483648 "
    "AND impact >= 0 AND impact < 4294967296 THEN (impact << 31) | item END "
    "FROM postings WHERE scope = ?"
)


def scopes_postings(scopes: int) -> str:
    """Every posting of ``scopes`` scopes (read through the primary key)."""
    return f"SELECT scope, term, impact, item FROM postings WHERE scope IN ({marks(scopes)})"


def scopes_vectors(scopes: int) -> str:
    """Every vector of ``scopes`` scopes."""
    return f"SELECT item, scope, vector FROM search_vectors WHERE scope IN ({marks(scopes)})"


NEW_SCOPE = "INSERT INTO scopes (tenant_id, agent_id, purpose) VALUES (?, ?, ?) RETURNING id"
TOP_ROWID = "SELECT coalesce(max(rowid), 0) FROM memories"
LOAD_ITEM = f"INSERT INTO memories (rowid, {COLUMNS}) VALUES (?1, {', '.join(_item_values(2))})"
# Parameters: ITEM_COLUMNS, then the rowid.
REWRITE_ITEM = (
    "UPDATE memories SET "
    + ", ".join(f"{c} = {v}" for c, v in zip(ITEM_COLUMNS, _item_values(1), strict=True))
    + f" WHERE rowid = ?{len(ITEM_COLUMNS) + 1}"
)
DELETE_ITEM = "DELETE FROM memories WHERE rowid = ?"
LOAD_VECTOR = INSERT_VECTOR
SCOPE_TOTALS = (
    "UPDATE scopes SET documents = ?, total_length = ?, generation = generation + 1 WHERE id = ?"
)
SCOPE_CHANGED = "UPDATE scopes SET generation = generation + 1 WHERE id = ?"
# A tenant too large to compare (rebuild_diff.COMPARED_ITEMS): its rows deleted, its
# scopes emptied (their ids stay), then loaded whole.
_TENANT_SCOPE_IDS = "(SELECT id FROM scopes WHERE tenant_id = ?)"
CLEAR_TENANT = (
    f"DELETE FROM postings WHERE scope IN {_TENANT_SCOPE_IDS}",
    f"DELETE FROM search_vectors WHERE scope IN {_TENANT_SCOPE_IDS}",
    "DELETE FROM search_docs WHERE item IN (SELECT rowid FROM memories WHERE tenant_id = ?)",
    "DELETE FROM memories WHERE tenant_id = ?",
    "UPDATE scopes SET documents = 0, total_length = 0, generation = generation + 1 "
    "WHERE tenant_id = ?",
)
