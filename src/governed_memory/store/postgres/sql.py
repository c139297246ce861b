"""The SQL of the PostgreSQL store: every value travels as a parameter.

psycopg prepares each of these on a connection after a few executions, so the server
plans them once per connection rather than once per write. The reads here satisfy
:class:`governed_memory.store.sql_reads.Dialect`; SQLite's counterpart is
``store/sqlite/sql.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from governed_memory.codec import API_KEY_COLUMNS, EVENT_COLUMNS, ITEM_COLUMNS

P = "%s"
EVERY_ROW: int | None = None  # LIMIT NULL reads every row


def any_of(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """``column = ANY (%s::text[])``, the values as one array parameter."""
    return f"{column} = ANY (%s::text[])", [list(values)]


COLUMNS = ", ".join(ITEM_COLUMNS)
ITEM_SELECT = f"SELECT {COLUMNS} FROM memories"
API_KEY_SELECT = f"SELECT {', '.join(API_KEY_COLUMNS)} FROM api_keys"
EVENT_SELECT = "SELECT position, " + ", ".join(EVENT_COLUMNS) + " FROM events"
EVENT_VALUES = ", ".join(f"%({name})s" for name in EVENT_COLUMNS)


# -- reads ----------------------------------------------------------------------------------

# A write's two reads in one statement: the subject's key and the item's row (each NULL
# when absent), joined to a one-row table so that the row always exists.
WRITE_STATE = (
    "SELECT k.key_id, k.wrapped, "
    + ", ".join(f"m.{c}" for c in ITEM_COLUMNS)
    + " FROM (SELECT 1) AS one "
    "LEFT JOIN subject_keys AS k ON k.tenant_id = %s AND k.subject_id = %s "
    "LEFT JOIN memories AS m ON m.tenant_id = %s AND m.id = %s"
)
GET_ITEM = ITEM_SELECT + " WHERE tenant_id = %s AND id = %s"
SUBJECT_ITEMS = ITEM_SELECT + " WHERE tenant_id = %s AND subject_id = %s ORDER BY id"
TENANT_ITEMS = ITEM_SELECT + " WHERE tenant_id = %s ORDER BY id"
DUE_FOR_EXPIRY = (
    ITEM_SELECT + " WHERE status IN ('active', 'quarantined') AND expires_at <= %s "
    "ORDER BY expires_at, tenant_id, id LIMIT %s"
)
QUARANTINE = ITEM_SELECT + " WHERE tenant_id = %s AND status = 'quarantined'"
# Items still holding content in a status that has a retention window (the partial index
# memories_retention); sql_reads adds each (kind, status) cutoff and the cursor.
DUE_FOR_RETENTION = (
    ITEM_SELECT + " WHERE content IS NOT NULL AND status IN ('expired', 'rejected', 'superseded')"
)
GET_ITEM_KEY = (
    "SELECT subject_id, key_id, wrapped FROM item_keys WHERE tenant_id = %s AND memory_id = %s"
)
ITEM_KEYS_OF = "SELECT memory_id, subject_id, key_id, wrapped FROM item_keys WHERE tenant_id = %s"
ITEM_KEYS = (
    "SELECT tenant_id, memory_id, subject_id, key_id, wrapped FROM item_keys "
    "ORDER BY tenant_id, memory_id LIMIT %s"
)
GET_VERSION = "SELECT version FROM memories WHERE tenant_id = %(tenant)s AND id = %(id)s"
GET_KEY_ID = (
    "SELECT key_id FROM subject_keys WHERE tenant_id = %(tenant)s AND subject_id = %(subject)s"
)
GET_SUBJECT_KEY = (
    "SELECT key_id, wrapped FROM subject_keys WHERE tenant_id = %s AND subject_id = %s"
)
SUBJECT_KEYS_OF = "SELECT subject_id, key_id, wrapped FROM subject_keys WHERE tenant_id = %s"
SUBJECT_KEYS = (
    "SELECT tenant_id, subject_id, key_id, wrapped FROM subject_keys "
    "ORDER BY tenant_id, subject_id LIMIT %s"
)
GET_IDEMPOTENCY = (
    "SELECT fingerprint, result, position FROM idempotency "
    "WHERE tenant_id = %s AND credential = %s AND key = %s"
)
#: Idempotency records after a (tenant, credential, key), in that order: an export's pages.
IDEMPOTENCY_PAGE = (
    "SELECT tenant_id, credential, key, fingerprint, result, position FROM idempotency "
    "WHERE (tenant_id, credential, key) > (%s, %s, %s) "
    "ORDER BY tenant_id, credential, key LIMIT %s"
)
#: An imported idempotency record, with the position it had in the exported store.
IMPORT_IDEMPOTENCY = (
    "INSERT INTO idempotency (tenant_id, credential, key, fingerprint, result, position) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
EVENTS_AFTER = EVENT_SELECT + " WHERE position > %s ORDER BY position LIMIT %s"
TENANT_EVENTS_AFTER = (
    EVENT_SELECT + " WHERE tenant_id = %s AND position > %s ORDER BY position LIMIT %s"
)
TENANT_EVENTS_BEFORE = (
    EVENT_SELECT + " WHERE tenant_id = %s AND position < %s ORDER BY position DESC LIMIT %s"
)
MEMORY_EVENTS = (
    f"{EVENT_SELECT} WHERE tenant_id = %s AND memory_id = %s "
    f"UNION ALL {EVENT_SELECT} WHERE tenant_id = %s "
    "AND subject_id = %s AND type = 'subject.forgotten' ORDER BY position"
)
# The hash chain (store/chain_links.py): stored events with their hashes, and a head.
CHAIN_SELECT = "SELECT position, " + ", ".join(EVENT_COLUMNS) + ", prev_hash, hash FROM events"
CHAIN_AFTER = CHAIN_SELECT + " WHERE position > %s ORDER BY position LIMIT %s"
TENANT_CHAIN_AFTER = (
    CHAIN_SELECT + " WHERE tenant_id = %s AND position > %s ORDER BY position LIMIT %s"
)
TENANT_HEAD_HASH = "SELECT hash FROM events WHERE tenant_id = %s ORDER BY position DESC LIMIT 1"
# Migration 8 links the events stored before the chain (chain_links.fill).
UNCHAINED_EVENTS = EVENT_SELECT + " ORDER BY position"
SET_CHAIN = "UPDATE events SET prev_hash = %s, hash = %s WHERE position = %s"
TENANTS = "SELECT DISTINCT tenant_id FROM events ORDER BY tenant_id"
HEAD = "SELECT coalesce(max(position), 0) FROM events"
TENANT_HEAD = "SELECT coalesce(max(position), 0) FROM events WHERE tenant_id = %s"
SCHEMA_VERSION = "SELECT coalesce(max(version), 0) FROM schema_migrations"
PING = "SELECT 1 FROM schema_migrations LIMIT 1"
GET_API_KEY = API_KEY_SELECT + " WHERE key_id = %s"
# API keys are written by one autocommit statement each; RETURNING gives the driver rows.
INSERT_API_KEY = (
    f"INSERT INTO api_keys ({', '.join(API_KEY_COLUMNS)}) "
    f"VALUES ({', '.join('%s' for _ in API_KEY_COLUMNS)}) RETURNING key_id"
)
GET_META = "SELECT value FROM store_meta WHERE name = %s"
CLAIM_META = (
    "INSERT INTO store_meta (name, value) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING "
    "RETURNING value"
)
REPLACE_META = (
    "INSERT INTO store_meta (name, value) VALUES (%s, %s) "
    "ON CONFLICT (name) DO UPDATE SET value = excluded.value RETURNING value"
)
REVOKE_API_KEY = (
    "UPDATE api_keys SET revoked_at = coalesce(revoked_at, %s) WHERE key_id = %s RETURNING key_id"
)
TOUCH_API_KEY = (
    "UPDATE api_keys SET last_used_at = %s WHERE key_id = %s "
    "AND (last_used_at IS NULL OR last_used_at < %s) RETURNING key_id"
)

# The matches of a search, one row per item with its term frequencies: postings of the
# query terms in one scope (the primary key's prefix), under every hard filter. With
# %(want)s set, each match is also scored with the core's formula (BM25 over the scope +
# confidence + recency: core.retrieval.lexical_part + static_parts, as retrieval.rank sums
# them) and only those that can rank in the top %(want)s are kept, near-ties of the last
# one included; the core ranks the survivors again, exactly, so this score only has to
# agree up to rounding.
_WEIGHTS = (
    "w AS (SELECT * FROM unnest(%(terms)s::bigint[], %(weights)s::float8[]) AS w (term, weight))"
)
# A posting's tf and its item's length, read back from its impact (store/impact.py).
_TF = "(p.impact >> 16)"
_LENGTH = "(65535 - (p.impact & 65535))"
_LEXICAL = (
    f"sum(w.weight * {_TF} * (%(k1)s + 1.0) / ({_TF} + %(k1)s * "
    f"(1.0 - %(b)s + %(b)s * {_LENGTH} / %(average)s::float8)))"
)
_STATIC = (
    "%(confidence_weight)s * {confidence} + %(recency_weight)s / "
    "(1.0 + greatest(%(now)s - {updated_at}, 0) / %(half_life)s::float8)"
)
_ITEM_FILTERS = (
    "m.tenant_id = %(tenant)s AND m.agent_id = %(agent)s AND m.purpose = %(purpose)s "
    "AND m.status = 'active' AND m.expires_at > %(now)s"
)
_PRUNE = (
    "cut AS (SELECT score - 1e-9 AS score FROM c ORDER BY score DESC "
    "OFFSET %(want)s::integer - 1 LIMIT 1), "
    "kept AS (SELECT * FROM c WHERE %(want)s::integer IS NULL "
    "OR NOT EXISTS (SELECT 1 FROM cut) OR c.score >= (SELECT score FROM cut)) "
)
_PRUNED = (
    "%(want)s::integer IS NOT NULL AND EXISTS (SELECT 1 FROM c, cut WHERE c.score < cut.score)"
)
# A whole scope: the postings are summed per item (tf and length come from the impact),
# each item's document adds its static part and filters expiry and kinds; only the kept
# few are joined to their items, where every hard filter applies again.
SCOPE_CANDIDATES = (
    f"WITH {_WEIGHTS}, "
    f"a AS (SELECT p.item, array_agg(p.term) AS terms, array_agg({_TF}) AS tfs, "
    f"min({_LENGTH}) AS length, {_LEXICAL} AS lexical "
    "FROM postings AS p JOIN w ON w.term = p.term "
    "WHERE p.scope = %(scope)s AND p.term = ANY (%(terms)s::bigint[]) GROUP BY p.item), "
    "c AS (SELECT a.item, a.terms, a.tfs, a.length, a.lexical + "
    + _STATIC.format(confidence="d.confidence", updated_at="d.updated_at")
    + " AS score FROM a JOIN search_docs AS d ON d.item = a.item "
    "WHERE d.expires_at > %(now)s{kinds}), "
    f"{_PRUNE}"
    "SELECT m.id, kept.terms, kept.tfs, kept.length, m.confidence, m.updated_at, m.tokens, "
    f"{_PRUNED} AS pruned{{rows}} FROM kept JOIN memories AS m ON m.rowid = kept.item"
    f"{{keys}} WHERE {_ITEM_FILTERS}{{item_kinds}}"
)
# One subject's items: joined first (they are few), then scored.
SUBJECT_CANDIDATES = (
    f"WITH {_WEIGHTS}, "
    f"c AS (SELECT m.rowid, m.id, array_agg(p.term) AS terms, array_agg({_TF}) AS tfs, "
    f"min({_LENGTH}) AS length, m.confidence, m.updated_at, m.tokens, "
    f"{_LEXICAL} + "
    + _STATIC.format(confidence="m.confidence", updated_at="m.updated_at")
    + " AS score "
    "FROM postings AS p JOIN w ON w.term = p.term JOIN memories AS m ON m.rowid = p.item "
    "WHERE p.scope = %(scope)s AND p.term = ANY (%(terms)s::bigint[]) "
    f"AND {_ITEM_FILTERS} AND m.subject_id = %(subject)s{{item_kinds}} GROUP BY m.rowid), "
    f"{_PRUNE}"
    "SELECT kept.id, kept.terms, kept.tfs, kept.length, kept.confidence, kept.updated_at, "
    f"kept.tokens, {_PRUNED} AS pruned{{rows}} FROM kept{{keys}}"
)
# With a request's rows (records.SearchRequest.rows), each candidate also carries its row
# (ITEM_COLUMNS, read by codec.item_from_row), its subject's key and its own key, each
# NULL where there is none: the hits of a search come in the same statement, and so from
# the same snapshot, as its scores. The candidates kept are few (the top ``want`` and its
# near-ties), so the rows that ride along are few too.
ROW_COLUMNS = (
    ", "
    + ", ".join(f"m.{c}" for c in ITEM_COLUMNS)
    + ", sk.key_id, sk.wrapped, ik.subject_id, ik.key_id, ik.wrapped"
)
KEY_JOINS = (
    " LEFT JOIN subject_keys AS sk ON sk.tenant_id = m.tenant_id AND sk.subject_id = m.subject_id"
    " LEFT JOIN item_keys AS ik ON ik.tenant_id = m.tenant_id AND ik.memory_id = m.id"
)
SUBJECT_KEY_JOINS = " JOIN memories AS m ON m.rowid = kept.rowid" + KEY_JOINS

# A whole search in one statement (one round trip): the scope's statistics, each query
# term's document frequency and IDF (core.retrieval.idf, in SQL), the index's recorded
# signature, and the candidates of SCOPE_CANDIDATES or SUBJECT_CANDIDATES scored with
# those IDFs. Always one row when the scope exists (the statistics; candidate columns
# NULL when there is none), none when it does not.
_SCOPE_STATS = (
    "s AS (SELECT id, documents, total_length, CASE WHEN documents > 0 "
    "THEN total_length::float8 / documents ELSE 1.0 END AS average FROM scopes "
    "WHERE tenant_id = %(tenant)s AND agent_id = %(agent)s AND purpose = %(purpose)s), "
    "f AS (SELECT t.term, t.n, (SELECT count(*) FROM postings AS p "
    "WHERE p.scope = s.id AND p.term = t.term) AS df "
    "FROM s CROSS JOIN unnest(%(terms)s::bigint[]) WITH ORDINALITY AS t (term, n)), "
    "w AS (SELECT f.term, ln(1.0::float8 + (s.documents - f.df + 0.5::float8) "
    "/ (f.df + 0.5::float8)) AS weight FROM f CROSS JOIN s WHERE f.df > 0)"
)
_ONE = (
    "SELECT s.id, s.documents, s.total_length, "
    "(SELECT array_agg(f.df ORDER BY f.n) FROM f), "
    "(SELECT value FROM store_meta WHERE name = %(meta)s), r.* "
    "FROM s LEFT JOIN ({candidates}) AS r ON true"
)


def one_search(candidates: str) -> str:
    """SCOPE_CANDIDATES or SUBJECT_CANDIDATES (already formatted for kinds) as one
    statement with the scope's statistics (see above)."""
    body = candidates.replace(f"WITH {_WEIGHTS}, ", "", 1)
    body = body.replace("%(scope)s", "(SELECT id FROM s)")
    body = body.replace("%(average)s::float8", "(SELECT average FROM s)")
    ctes, prune, select = body.partition(_PRUNE)  # the statement after the CTEs
    return f"WITH {_SCOPE_STATS}, {ctes}{prune}" + _ONE.format(candidates=select)


# The sealed vectors of a scope's items under every hard filter (store.sql_reads appends
# the subject and kinds filters).
SCOPE_VECTORS = (
    "SELECT m.id, m.subject_id, m.content_version, v.vector, m.confidence, m.updated_at, "
    "m.tokens FROM search_vectors AS v JOIN memories AS m ON m.rowid = v.item "
    "WHERE v.scope = (SELECT id FROM scopes WHERE tenant_id = %s AND agent_id = %s "
    "AND purpose = %s) AND m.tenant_id = %s AND m.agent_id = %s AND m.purpose = %s "
    "AND m.status = 'active' AND m.expires_at > %s"
)

# -- writes ---------------------------------------------------------------------------------

# The write lock (database.PostgresDatabase.log_lock), taken first by every write
# transaction and held until it ends (see batch.PostgresBatches.lock).
LOCK_LOG = "SELECT pg_advisory_xact_lock(%s)"

# Under the write lock the next position is the current maximum plus one: positions are
# gapless, and a batch rolled back leaves no hole.
_NEXT_POSITION = "(SELECT coalesce(max(position), 0) + 1 FROM events)"
# The event's hash is computed here, where its place is decided: the tenant's head is read
# under the write lock, and the hash is SHA-256(head || the digest of the event's columns,
# computed by the store in Python) -- governed_memory.chain.chain_hash, in SQL.
_HEAD_HASH = (
    "coalesce((SELECT hash FROM events WHERE tenant_id = %(tenant_id)s "
    "ORDER BY position DESC LIMIT 1), %(genesis)s::bytea)"
)
INSERT_EVENT = (
    f"INSERT INTO events (position, {', '.join(EVENT_COLUMNS)}, prev_hash, hash) "
    f"SELECT {_NEXT_POSITION}, {EVENT_VALUES}, h.prev, sha256(h.prev || %(digest)s::bytea) "
    f"FROM (SELECT {_HEAD_HASH} AS prev) AS h "
    "RETURNING position"
)
# The first statement of a batch, as the SQLite store checks the key first; the batch's
# first event takes the next position, since the write lock is held.
INSERT_IDEMPOTENCY = (
    "INSERT INTO idempotency (tenant_id, credential, key, fingerprint, result, position) "
    "VALUES (%(tenant)s, %(credential)s, %(key)s, %(fingerprint)s, %(result)s, "
    f"CASE WHEN %(logged)s::boolean THEN {_NEXT_POSITION} END)"
)
_KEY_OK = (
    "gm_require((SELECT key_id FROM subject_keys WHERE tenant_id = %(k_tenant)s "
    "AND subject_id = %(k_subject)s) = %(k_key_id)s, 'subject_key')"
)
# Postings made for another index than the one recorded (if any) are refused: the rule of
# records.serves_index, in SQL.
_INDEX_OK = (
    "gm_require(coalesce((SELECT value FROM store_meta WHERE name = %(name)s), "
    "%(signature)s) IN (%(signature)s, %(rebuilding)s), 'search_index')"
)
_ITEM_KEY_VALUES = "(%(ik_tenant)s, %(ik_memory)s, %(ik_subject)s, %(ik_key_id)s, %(ik_wrapped)s)"


@functools.cache
def guarded_event(*, index: bool, idempotency: bool, key: bool, item_key: bool, event: bool) -> str:
    """A batch's checks and small rows in the statement of its first event (or alone).

    One statement instead of four (the index's signature, the idempotency record, the
    subject key's check, the new item's key), each a CTE: psycopg's cost per statement
    is most of a write's client time. The checks run after the write lock is taken (an
    earlier statement), so they see every earlier commit; a failed one raises and aborts
    the transaction, and :meth:`.batch.PostgresBatches._explain` reads what failed, as
    it did when these were separate statements. The idempotency record's position is the
    event's: both are the current maximum plus one in the same snapshot.
    """
    head = "WITH " + ", ".join(_guards(index, idempotency, key, item_key)) + " "
    if not event:
        return head + "SELECT ok FROM ok"
    return head + _GUARDED_INSERT_EVENT


def _guards(index: bool, idempotency: bool, key: bool, item_key: bool) -> list[str]:
    """The CTEs of :func:`guarded_event`: ``ok`` (the checks), the idempotency record
    and the new item's key."""
    checks = [c for c, on in ((_INDEX_OK, index), (_KEY_OK, key)) if on] or ["true"]
    ctes = [f"ok AS (SELECT {' AND '.join(checks)} AS ok)"]
    if idempotency:
        ctes.append(f"ip AS ({INSERT_IDEMPOTENCY})")
    if item_key:
        ctes.append(f"ik AS (INSERT INTO item_keys {_ITEM_KEY_COLUMNS} VALUES {_ITEM_KEY_VALUES})")
    return ctes


# The event insert after the checks: it reads ``ok``, so they run before it.
_GUARDED_INSERT_EVENT = INSERT_EVENT.replace(") AS h ", ") AS h, ok ")

#: The prefix of the event's and the checks' parameters in :func:`item_and_event`, where
#: they share a statement with the item's (``tenant_id``, ``version``… name both).
EVENT_PREFIX = "e_"
#: The event's and the checks' parameters that hold what an item's parameter holds in a
#: batch of one item (its tenant, its id): :func:`item_and_event` names the item's, so that
#: the statement passes fewer (the store checks that they are equal, else sends two).
SHARED_PARAMS = {
    "tenant_id": "tenant_id",
    "tenant": "tenant_id",
    "k_tenant": "tenant_id",
    "ik_tenant": "tenant_id",
    "memory_id": "id",
    "ik_memory": "id",
}


@functools.cache
def item_and_event(
    *, new: bool, indexed: bool, index: bool, idempotency: bool, key: bool, item_key: bool
) -> str:
    """A batch of one item in one statement: the item's row (and its postings) as
    :data:`WRITE_ITEM` writes them, and the first event with the batch's checks as
    :func:`guarded_event` writes it, the event's parameters prefixed by
    :data:`EVENT_PREFIX` but for those of :data:`SHARED_PARAMS`, which take the item's.
    It returns the event's position.

    One statement fewer in the write's pipeline, with the same effects: both parts run
    after the write lock (an earlier statement), neither reads a table the other writes,
    and any failure (the item's unique key or version guard, a check) aborts the whole
    transaction, which :meth:`.batch.PostgresBatches._explain` then explains as before.
    """
    item = [f"m AS ({_INSERT_ITEM if new else _UPDATE_ITEM})"]
    if indexed:
        item.append(_INDEX.strip().removesuffix(","))
    event = [*_guards(index, idempotency, key, item_key), f"e AS ({_GUARDED_INSERT_EVENT})"]
    event_ctes = ", ".join(event).replace("%(", "%(" + EVENT_PREFIX)
    for name, item_name in SHARED_PARAMS.items():
        event_ctes = event_ctes.replace(f"%({EVENT_PREFIX}{name})s", f"%({item_name})s")
    guard = "" if new else ", gm_require(EXISTS (SELECT 1 FROM m), 'version')"
    return f"WITH {', '.join(item)}, {event_ctes} SELECT e.position{guard} FROM e"


# Delete the key, then refuse if an item of the subject is left undeleted (this statement
# sees the batch's own deletions, made by earlier statements of the transaction).
DESTROY_KEY = (
    "WITH gone AS (DELETE FROM subject_keys WHERE tenant_id = %(tenant)s "
    "AND subject_id = %(subject)s) "
    "SELECT gm_require(NOT EXISTS (SELECT 1 FROM memories WHERE tenant_id = %(tenant)s "
    "AND subject_id = %(subject)s AND status <> 'deleted'), 'subject_changed')"
)

# A new item is a plain INSERT: the unique constraint on (tenant_id, id) refuses it when the
# id exists. A change is an UPDATE guarded by the version it was decided on; matching no
# row fails the guard.
_INSERT_ITEM = (
    f"INSERT INTO memories ({COLUMNS}) VALUES ("
    + ", ".join(f"%({c})s" for c in ITEM_COLUMNS)
    + ") RETURNING rowid"
)
_UPDATE_ITEM = (
    "UPDATE memories SET "
    + ", ".join(f"{c} = %({c})s" for c in ITEM_COLUMNS[2:])
    + " WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND version = %(expected)s"
    " RETURNING rowid"
)
_GUARD = "SELECT gm_require(EXISTS (SELECT 1 FROM m), 'version')"
# A posting's impact (store/impact.py), in SQL.
_IMPACT = "(({tf}) << 16) | (65535 - ({length}))"
# The postings of a searchable item, its document and its scope's statistics, in the same
# statement as the item row: one INSERT … SELECT FROM unnest for all the postings.
_INDEX = (
    "s AS (INSERT INTO scopes AS s (tenant_id, agent_id, purpose, documents, total_length) "
    "SELECT %(tenant_id)s, %(agent_id)s, %(purpose)s, 1, %(length)s::integer FROM m "
    "ON CONFLICT (tenant_id, agent_id, purpose) DO UPDATE SET "
    "documents = s.documents + 1, total_length = s.total_length + excluded.total_length "
    "RETURNING id), "
    "d AS (INSERT INTO search_docs "
    "(item, scope, length, confidence, updated_at, expires_at, kind, terms, tfs) "
    "SELECT m.rowid, s.id, %(length)s, %(confidence)s, %(updated_at)s, %(expires_at)s, "
    "%(kind)s, %(terms)s::bigint[], %(tfs)s::integer[] FROM m, s), "
    "p AS (INSERT INTO postings (scope, term, impact, item) "
    f"SELECT s.id, u.term, {_IMPACT.format(tf='u.tf', length='%(length)s::integer')}, "
    "m.rowid FROM m, s, unnest(%(terms)s::bigint[], %(tfs)s::integer[]) AS u (term, tf)), "
    "v AS (INSERT INTO search_vectors (item, scope, vector) "
    "SELECT m.rowid, s.id, %(vector)s::bytea FROM m, s WHERE %(vector)s::bytea IS NOT NULL) "
)
WRITE_ITEM = {
    # (new item, indexed) -> statement
    (True, False): (_INSERT_ITEM),
    (True, True): f"WITH m AS ({_INSERT_ITEM}), {_INDEX}SELECT 1",
    (False, False): f"WITH m AS ({_UPDATE_ITEM}) {_GUARD}",
    (False, True): f"WITH m AS ({_UPDATE_ITEM}), {_INDEX}{_GUARD}",
}
# Before an item changes, its old postings go, and its scope's statistics with them. They
# are deleted by their exact keys, recomputed from the document; if fewer go than the
# document has terms (document and postings disagree), `f` deletes every posting of the
# item in its scope (a scan of the scope), and the statement returns how many it found.
DROP_INDEX = (
    "WITH d AS (DELETE FROM search_docs WHERE item = "
    "(SELECT rowid FROM memories WHERE tenant_id = %(tenant)s AND id = %(id)s) "
    "RETURNING item, scope, length, terms, tfs), "
    "p AS (DELETE FROM postings USING d, unnest(d.terms, d.tfs) AS u (term, tf) "
    "WHERE postings.scope = d.scope AND postings.term = u.term "
    f"AND postings.impact = {_IMPACT.format(tf='u.tf', length='d.length')} "
    "AND postings.item = d.item RETURNING 1), "
    "f AS (DELETE FROM postings WHERE (scope, item) IN (SELECT d.scope, d.item FROM d "
    "WHERE (SELECT count(*) FROM p) <> cardinality(d.terms)) RETURNING 1), "
    "v AS (DELETE FROM search_vectors USING d WHERE search_vectors.item = d.item) "
    "UPDATE scopes SET documents = scopes.documents - 1, "
    "total_length = scopes.total_length - d.length FROM d WHERE scopes.id = d.scope "
    "RETURNING (SELECT count(*) FROM f)"
)
INSERT_SUBJECT_KEY = (
    "INSERT INTO subject_keys (tenant_id, subject_id, key_id, wrapped) "
    "VALUES (%s, %s, %s, %s) ON CONFLICT (tenant_id, subject_id) DO NOTHING"
)
_ITEM_KEY_COLUMNS = "(tenant_id, memory_id, subject_id, key_id, wrapped)"
INSERT_ITEM_KEY = f"INSERT INTO item_keys {_ITEM_KEY_COLUMNS} VALUES (%s, %s, %s, %s, %s)"
DESTROY_ITEM_KEY = "DELETE FROM item_keys WHERE tenant_id = %(tenant)s AND memory_id = %(id)s"
# Forget: the subject's item keys go with the subject key (they are wrapped by it).
DESTROY_ITEM_KEYS = (
    "DELETE FROM item_keys WHERE tenant_id = %(tenant)s AND subject_id = %(subject)s"
)
# After a refused forget (batch._explain): an item of the subject the batch left undeleted.
SUBJECT_LEFT = (
    "SELECT 1 FROM memories WHERE tenant_id = %s AND subject_id = %s "
    "AND status <> 'deleted' AND NOT id = ANY (%s) LIMIT 1"
)
IMPORT_EVENT = (
    f"INSERT INTO events (position, {', '.join(EVENT_COLUMNS)}, prev_hash, hash) "
    f"VALUES (%(position)s, {EVENT_VALUES}, %(prev_hash)s, %(hash)s)"
)

# -- rebuild (see bulk.py) ------------------------------------------------------------------

# What several tenants' rows hold, read by a rebuild to write only what differs (bulk.py).
REBUILD_SCOPES = (
    "SELECT tenant_id, agent_id, purpose, id, documents, total_length FROM scopes "
    "WHERE tenant_id = ANY (%s::text[])"
)
REBUILD_ITEMS = f"SELECT rowid, {COLUMNS} FROM memories WHERE tenant_id = ANY (%s::text[])"
REBUILD_DOCUMENTS = (
    "SELECT d.item, d.scope, d.length, d.confidence, d.updated_at, d.expires_at, d.kind, "
    "d.terms, d.tfs FROM memories AS m JOIN search_docs AS d ON d.item = m.rowid "
    "WHERE m.tenant_id = ANY (%s::text[])"
)
REBUILD_POSTINGS = "SELECT scope, term, impact, item FROM postings WHERE scope = ANY (%s::bigint[])"
REBUILD_VECTORS = "SELECT item, scope, vector FROM search_vectors WHERE scope = ANY (%s::bigint[])"
DELETE_VECTORS = "DELETE FROM search_vectors WHERE item = ANY (%s::bigint[])"
DELETE_DOCUMENTS = "DELETE FROM search_docs WHERE item = ANY (%s::bigint[])"
DELETE_POSTINGS = (
    "DELETE FROM postings WHERE (scope, term, impact, item) IN (SELECT * FROM "
    "unnest(%s::bigint[], %s::bigint[], %s::integer[], %s::bigint[]))"
)
DELETE_ITEMS = "DELETE FROM memories WHERE rowid = ANY (%s::bigint[])"
REWRITE_ITEM = (
    "UPDATE memories SET " + ", ".join(f"{c} = %s" for c in ITEM_COLUMNS) + " WHERE rowid = %s"
)
NEW_SCOPES = (
    "INSERT INTO scopes (tenant_id, agent_id, purpose) "
    "SELECT %s, a, p FROM unnest(%s::text[], %s::text[]) AS k (a, p) "
    "ON CONFLICT (tenant_id, agent_id, purpose) DO NOTHING"
)
TENANT_SCOPES = "SELECT agent_id, purpose, id FROM scopes WHERE tenant_id = %s"
# A tenant too large to compare (rebuild_diff.COMPARED_ITEMS): its rows deleted, its
# scopes emptied (their ids stay), then loaded whole.
_TENANT_SCOPE_IDS = "(SELECT id FROM scopes WHERE tenant_id = %s)"
CLEAR_TENANT = (
    f"DELETE FROM postings WHERE scope IN {_TENANT_SCOPE_IDS}",
    f"DELETE FROM search_vectors WHERE scope IN {_TENANT_SCOPE_IDS}",
    "DELETE FROM search_docs WHERE item IN (SELECT rowid FROM memories WHERE tenant_id = %s)",
    "DELETE FROM memories WHERE tenant_id = %s",
    "UPDATE scopes SET documents = 0, total_length = 0 WHERE tenant_id = %s",
)
NEXT_ROWIDS = (
    "SELECT nextval(pg_get_serial_sequence('memories', 'rowid')) FROM generate_series(1, %s)"
)
COPY_ITEMS = f"COPY memories (rowid, {COLUMNS}) FROM STDIN"
COPY_POSTINGS = "COPY postings (scope, term, impact, item) FROM STDIN"
COPY_DOCUMENTS = (
    "COPY search_docs (item, scope, length, confidence, updated_at, expires_at, kind, terms, "
    "tfs) FROM STDIN"
)
COPY_VECTORS = "COPY search_vectors (item, scope, vector) FROM STDIN"
# The scopes whose totals differ from the folded ones (id, documents, length).
SCOPE_TOTALS = (
    "UPDATE scopes SET documents = t.documents, total_length = t.total_length "
    "FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS t (id, documents, total_length) "
    "WHERE scopes.id = t.id"
)
