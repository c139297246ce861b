"""Migration 0007 on a store made before it: keys, idempotency records and four eyes keep
their behaviour, on SQLite and PostgreSQL.

The old store is made with today's code acting exactly as the old one did (every key its
own principal ``key:<id>``, which was also its credential), then taken back to the schema
of migrations 0001–0003 for the two tables 0007 changes, and opened again.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from governed_memory.apikeys import create_api_key, split_token, verify
from governed_memory.core.values import Scope, Status, Trust
from governed_memory.crypto import Keyring
from governed_memory.errors import SelfPromotion
from governed_memory.ports import Store
from governed_memory.records import ApiKey
from governed_memory.results import ForgetResult, WriteResult
from governed_memory.service import MemoryService
from governed_memory.store.postgres import PostgresStore
from governed_memory.store.sqlite import SQLiteStore
from tests.support.fakes import START, FakeClock, body

# The two tables as migrations 0001 and 0002 made them (SQLite), and back to that shape.
SQLITE_BEFORE_0007 = """
CREATE TABLE api_keys_old (
    key_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, name TEXT, agents TEXT,
    scopes TEXT NOT NULL, max_trust TEXT NOT NULL, secret_hash TEXT NOT NULL,
    created_at INTEGER NOT NULL, revoked_at INTEGER);
INSERT INTO api_keys_old SELECT key_id, tenant_id, name, agents, scopes, max_trust,
    secret_hash, created_at, revoked_at FROM api_keys;
DROP TABLE api_keys;
ALTER TABLE api_keys_old RENAME TO api_keys;
CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id, created_at);
CREATE TABLE idempotency_old (
    tenant_id TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
    result TEXT NOT NULL, position INTEGER, PRIMARY KEY (tenant_id, key)) WITHOUT ROWID;
INSERT INTO idempotency_old SELECT tenant_id, key, fingerprint, result, position
    FROM idempotency;
DROP TABLE idempotency;
ALTER TABLE idempotency_old RENAME TO idempotency;
DELETE FROM schema_migrations WHERE version = 7;
"""
POSTGRES_BEFORE_0007 = [
    "ALTER TABLE api_keys DROP COLUMN principal_id, DROP COLUMN expires_at, "
    "DROP COLUMN last_used_at",
    "ALTER TABLE idempotency DROP CONSTRAINT idempotency_pkey",
    "ALTER TABLE idempotency DROP COLUMN credential",
    "ALTER TABLE idempotency ADD CONSTRAINT idempotency_pkey PRIMARY KEY (tenant_id, key)",
    "DELETE FROM schema_migrations WHERE version = 7",
]


@dataclass
class OldStore:
    """What was done in the store before the migration, to do again after it."""

    keys: dict[str, tuple[ApiKey, str]]
    written: WriteResult
    promoted_version: int
    forgot: ForgetResult


def make_old_store(store: Store, keyring: Keyring) -> OldStore:
    """Keys and keyed requests as the old code made them: each key its own principal."""
    keys = {}
    for name, scopes, trust in [
        ("writer", set(Scope) - {Scope.ADMIN}, Trust.TRUSTED),
        ("reviewer", {Scope.MEMORY_REVIEW, Scope.MEMORY_READ, Scope.MEMORY_WRITE}, Trust.TRUSTED),
    ]:
        record, token = create_api_key("acme", None, frozenset(scopes), trust, START, name)
        store.add_api_key(record)
        keys[name] = (record, token)
    writer, reviewer = keys["writer"][0].principal(), keys["reviewer"][0].principal()
    assert writer.principal_id == writer.credential == f"key:{keys['writer'][0].key_id}"
    service = MemoryService(store, keyring, clock=FakeClock())
    written = service.write(writer, body(id="m1"), idempotency_key="sync-1")
    service.write(writer, body(id="q1", trust="untrusted"))
    service.write(writer, body(id="q2", trust="untrusted"))
    promoted = service.promote(reviewer, "q2", 1, idempotency_key="review-1")
    forgot = service.forget_subject(writer, "nobody", idempotency_key="noop-1")
    assert forgot.position is None  # nothing to forget: a record without a position
    return OldStore(keys, written, promoted.version, forgot)


def check_behaviour_kept(store: Store, keyring: Keyring, old: OldStore) -> None:
    """After 0007: old keys authenticate as themselves, their retries replay, the record
    without a position has the legacy owner, another key's use of a key string is its
    own, and the writer's key still cannot review its own write."""
    service = MemoryService(store, keyring, clock=FakeClock())
    principals = {}
    for name, (record, token) in old.keys.items():
        found = store.api_key(record.key_id)
        assert found is not None
        assert (found.principal_id, found.expires_at, found.last_used_at) == (
            f"key:{record.key_id}",
            None,
            None,
        )
        principals[name] = verify(found, split_token(token)[1], START)
    writer, reviewer = principals["writer"], principals["reviewer"]
    head = store.head()
    assert service.write(writer, body(id="m1"), idempotency_key="sync-1") == old.written
    assert service.promote(reviewer, "q2", 1, idempotency_key="review-1").version == (
        old.promoted_version
    )
    assert store.head() == head
    assert store.idempotency("acme", "legacy:", "noop-1") is not None
    assert service.forget_subject(writer, "nobody", idempotency_key="noop-1") == old.forgot
    other = service.write(reviewer, body(id="m2"), idempotency_key="sync-1")
    assert other.created and store.head() == head + 1
    with pytest.raises(SelfPromotion):
        service.promote(writer, "q1", 1)
    assert service.promote(reviewer, "q1", 1).status is Status.ACTIVE


def test_sqlite_store_made_before_0007_keeps_its_keys_and_records(tmp_path: Path) -> None:
    """An SQLite store of the old schema migrates and behaves as before."""
    path, keyring = tmp_path / "gmem.sqlite3", Keyring(secrets.token_bytes(32))
    store = SQLiteStore(path, synchronous="NORMAL")
    old = make_old_store(store, keyring)
    store.close()
    with sqlite3.connect(path) as conn:
        conn.executescript(SQLITE_BEFORE_0007)
    conn.close()
    store = SQLiteStore(path, synchronous="NORMAL")
    try:
        (version,) = store.database.query("SELECT 1 FROM schema_migrations WHERE version = 7")
        assert version == (1,)
        check_behaviour_kept(store, keyring, old)
    finally:
        store.close()


def test_postgres_store_made_before_0007_keeps_its_keys_and_records(
    postgres_schema: tuple[str, str],
) -> None:
    """A PostgreSQL store of the old schema migrates and behaves as before."""
    dsn, schema = postgres_schema
    keyring = Keyring(secrets.token_bytes(32))
    opened: Callable[[], PostgresStore] = lambda: PostgresStore(dsn, schema=schema)  # noqa: E731
    store = opened()
    old = make_old_store(store, keyring)
    store.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        for statement in POSTGRES_BEFORE_0007:
            conn.execute(statement.encode())
    store = opened()
    try:
        check_behaviour_kept(store, keyring, old)
    finally:
        store.close()
