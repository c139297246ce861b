"""Erasing one memory and retention are erasure too (SPEC §7, §12), on both backends.

The first tests run the real ``gmem serve`` over SQLite: memories of one subject carry
canaries (in content, a rewrite, a rejection reason, the search index); two are erased
over HTTP, three more (expired, rejected, superseded) lose their content to retention
through ``gmem expire``; a sibling of the same subject is kept. Afterwards neither canary
nor any byte of the destroyed item keys is in any file of the data directory, in ``gmem
export`` or in the server's log; no key left opens any of their blobs; and the sibling
still reads back. The last test proves the same through the store on SQLite and
PostgreSQL: the key rows are gone, the projection holds no content, the postings are
gone, no key left opens the log's blobs, the sibling stays readable.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from governed_memory.bootstrap import open_service
from governed_memory.core.policy import RetentionPolicy
from governed_memory.core.values import Scope, Status
from governed_memory.crypto import Keyring, SealingKey, load_or_create_key_file
from governed_memory.errors import CryptoError
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from governed_memory.store.sqlite import SQLiteStore
from tests.conftest import make_store, postgres_dsn
from tests.reliability.servers import ServerProcess, create_key, gmem
from tests.reliability.test_erasure import encodings, sealed_blobs
from tests.support.fakes import FakeClock, body, principal, reviewer, write_body
from tests.support.fakes import query as query_body

ERASED = "erasedcanary" + secrets.token_hex(8)
RETAINED = "retainedcanary" + secrets.token_hex(8)
SIBLING = "siblingcanary" + secrets.token_hex(8)
#: The memories whose content is destroyed: erased, then past retention.
GONE = ("e1", "e2", "r1", "r2", "r3")
KEPT = ("sib", "fix")


@dataclass
class Destroyed:
    """A data directory in which the real server erased two memories and retention
    destroyed three more, with what was captured on the way."""

    data: Path
    log: Path
    export: str
    wrapped: dict[str, bytes]  # the wrapped item keys of the destroyed memories, before
    expire_out: str
    erase_answers: list[dict[str, Any]]
    while_serving: dict[str, bytes]  # every file of the data directory right after the erases


def _call(client: httpx.Client, method: str, path: str, body: Any, key: str) -> Any:
    response = client.request(method, path, json=body, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code < 300, response.text
    return response.json()


def _write_victims(client: httpx.Client, writer: str, reviewer_key: str) -> None:
    """The subject's memories: two to erase, three for retention, a sibling to keep."""

    def put(memory_id: str, **overrides: Any) -> None:
        content = write_body(subject_id="victim", **overrides)
        _call(client, "PUT", f"/v1/memories/{memory_id}", content, writer)

    put("e1", content=f"The card number is {ERASED}.")
    put("e1", content=f"Corrected: {ERASED} is the card.", expected_version=1)
    put("e2", content=f"Maybe {ERASED}.", trust="untrusted")
    reason = {"expected_version": 1, "reason": f"not {ERASED}"}
    _call(client, "POST", "/v1/memories/e2/reject", reason, reviewer_key)
    put("sib", content=f"The sibling says {SIBLING}.")
    put("r1", content=f"Short-lived {RETAINED}.", kind="working_note", ttl_seconds=1)
    put("r2", content=f"Poison {RETAINED}.", trust="untrusted")
    reason = {"expected_version": 1, "reason": f"poison {RETAINED}"}
    _call(client, "POST", "/v1/memories/r2/reject", reason, reviewer_key)
    put("r3", content=f"Old {RETAINED}.")
    put("fix", content="The sibling's correction.", supersedes_id="r3")
    search = {"agent_id": "support-bot", "purpose": "support", "query": ERASED}
    assert [i["id"] for i in _call(client, "POST", "/v1/search", search, writer)["items"]] == ["e1"]


def _wrapped_keys(data: Path) -> dict[str, bytes]:
    """The wrapped item keys as the database holds them now, by memory id."""
    conn = sqlite3.connect(data / "gmem.sqlite3")
    try:
        return {m: bytes(w) for m, w in conn.execute("SELECT memory_id, wrapped FROM item_keys")}
    finally:
        conn.close()


@pytest.fixture(scope="module")
def destroyed(tmp_path_factory: pytest.TempPathFactory) -> Destroyed:
    """Write canaries, erase two memories over HTTP, let retention take three, export."""
    root = tmp_path_factory.mktemp("erase-one")
    data, log = root / "data", root / "server.log"
    writer = create_key(data)
    reviewer_key = create_key(data, scopes="memory:review")
    dpo = create_key(data, scopes="subject:forget,memory:read")
    with ServerProcess(data, log, {"GMEM_LOG_LEVEL": "DEBUG"}) as server:
        client = httpx.Client(base_url=server.url, timeout=30)
        _write_victims(client, writer, reviewer_key)
        wrapped = _wrapped_keys(data)
        answers = [_call(client, "DELETE", f"/v1/memories/{m}", None, dpo) for m in ("e1", "e2")]
        answers.append(_call(client, "DELETE", "/v1/memories/e1", None, dpo))
        search = {"agent_id": "support-bot", "purpose": "support", "query": ERASED}
        assert _call(client, "POST", "/v1/search", search, writer)["items"] == []
        client.close()
        serving = {p.name: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    time.sleep(1.2)  # r1's time-to-live runs out
    windows = {f"GMEM_RETENTION_{s}_SECONDS": "0" for s in ("EXPIRED", "REJECTED", "SUPERSEDED")}
    expire_out = gmem(data, "expire", env=os.environ | windows)
    export = gmem(data, "export", "--output", "-")
    gone = {m: wrapped[m] for m in GONE}
    return Destroyed(data, log, export, gone, expire_out, answers, serving)


def test_erase_answers_with_the_erase_position_and_again_alike(destroyed: Destroyed) -> None:
    """Each DELETE answers {id, position}; erasing e1 again answers its first erase."""
    first, second, again = destroyed.erase_answers
    assert [first["id"], second["id"]] == ["e1", "e2"]
    assert second["position"] == first["position"] + 1
    assert again == first
    assert destroyed.expire_out.splitlines() == [
        "expired 1 item(s)",
        "destroyed the content of 3 item(s) past retention",
    ]


def test_no_canary_and_no_destroyed_key_is_in_any_file(destroyed: Destroyed) -> None:
    """Database, WAL, shared memory, key file: no byte form of a canary, and not one of the
    wrapped item keys of the five destroyed memories."""
    files = [p for p in destroyed.data.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"gmem.sqlite3", "master.key"}
    for path in files:
        raw = path.read_bytes()
        for form in encodings(ERASED) + encodings(RETAINED) + encodings(SIBLING):
            assert form not in raw, path.name
        for memory_id, wrapped in destroyed.wrapped.items():
            assert wrapped not in raw, (path.name, memory_id)


def test_an_erased_key_is_out_of_the_files_while_the_server_still_runs(
    destroyed: Destroyed,
) -> None:
    """The erase commits, secure_delete overwrites the key row and the WAL is checkpointed
    at once: a copy of the data directory taken then holds neither erased key."""
    assert "gmem.sqlite3" in destroyed.while_serving
    for name, raw in destroyed.while_serving.items():
        for memory_id in ("e1", "e2"):
            assert destroyed.wrapped[memory_id] not in raw, (name, memory_id)


def test_no_key_left_opens_a_destroyed_memory(destroyed: Destroyed) -> None:
    """With the master key, the subject's key and every item key left, none of the blobs
    the log keeps for the destroyed memories (contents, rewrites, reasons) opens."""
    keyring = Keyring(load_or_create_key_file(destroyed.data))
    store = SQLiteStore.in_directory(destroyed.data)
    try:
        subject = store.subject_key("acme", "victim")
        assert subject is not None
        left = [keyring.item_sealing_key(subject, key) for key in store.item_keys()]
        assert sorted(key.memory_id for key in left) == sorted(KEPT)
        sealed = [
            (stored.event.memory_id, stored.event.version, blob, purpose)
            for stored in store.events_after("acme", 0, 1000)
            for blob, purpose in sealed_blobs(stored.event)
            if stored.event.memory_id in GONE
        ]
    finally:
        store.close()
    assert len(sealed) == 8  # e1 twice, e2 and its reason, r1, r2 and its reason, r3
    candidates = [*left, keyring.subject_sealing_key(subject, "")]
    for memory_id, version, blob, purpose in sealed:
        for key in candidates:
            with pytest.raises(CryptoError):
                keyring.open(dataclasses.replace(key, memory_id=memory_id), version, blob, purpose)


def test_the_export_and_the_log_hold_no_canary_and_no_destroyed_key(
    destroyed: Destroyed,
) -> None:
    """gmem export carries only the kept memories' keys; neither it nor the server's DEBUG
    log holds a canary."""
    for text in (destroyed.export, destroyed.log.read_text()):
        for canary in (ERASED, RETAINED, SIBLING):
            assert canary not in text
    records = [json.loads(line) for line in destroyed.export.splitlines()]
    item_keys = sorted(r["memory_id"] for r in records if r["record"] == "item_key")
    assert item_keys == sorted(KEPT)
    types = {r["type"] for r in records if r["record"] == "event"}
    assert {"memory.erased", "memory.content_destroyed"} <= types


def test_the_subjects_other_memories_stay_readable(destroyed: Destroyed) -> None:
    """The sibling and the correction read back in full; the destroyed ones read as
    content-free, erased ones deleted, the others in their status."""
    service = open_service(data_dir=destroyed.data)
    try:
        writer = principal()
        assert SIBLING in (service.get(writer, "sib").content or "")
        assert service.get(writer, "fix").content == "The sibling's correction."
        shown = {m: service.get(writer, m) for m in GONE}
        assert {m: (i.status.value, i.content) for m, i in shown.items()} == {
            "e1": ("deleted", None),
            "e2": ("deleted", None),
            "r1": ("expired", None),
            "r2": ("rejected", None),
            "r3": ("superseded", None),
        }
        assert service.verify_replay().ok
    finally:
        service.close()


# -- through the store, on SQLite and PostgreSQL ------------------------------------------

Query = Callable[[str], list[tuple[Any, ...]]]


@dataclass
class Backend:
    """A service over a real database, and raw SQL reads of it (as an operator's psql)."""

    service: MemoryService
    query: Query
    clock: FakeClock


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """SQLite in a temp dir, or a fresh PostgreSQL schema; expired and rejected content
    is kept for no time at all."""
    clock = FakeClock()
    retention = RetentionPolicy.from_seconds(dict.fromkeys((Status.EXPIRED, Status.REJECTED), 0))
    stores = make_store(request.param, tmp_path)
    store = next(stores)
    service = MemoryService(store, Keyring(b"b" * 32), clock=clock, retention=retention)
    yield Backend(service, _raw_query(store), clock)
    for _ in stores:  # resumes the generator: closes the store, drops its schema
        pass


def _raw_query(store: Store) -> Query:
    """Plain SQL reads of the store's database, as an operator's sqlite3 or psql would."""
    if isinstance(store, SQLiteStore):
        path = store.path

        def query(statement: str) -> list[tuple[Any, ...]]:
            with sqlite3.connect(path) as conn:
                return conn.execute(statement).fetchall()

        return query
    dsn, schema = postgres_dsn(), getattr(store, "schema", None)
    assert dsn is not None and schema is not None

    def pg_query(statement: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(dsn) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            return conn.execute(statement.encode()).fetchall()

    return pg_query


def test_erase_and_retention_leave_no_key_and_no_content_on_either_backend(
    backend: Backend,
) -> None:
    """The destroyed memories' key rows are gone, their projection rows hold no content and
    no postings, no key left opens their blobs in the log; the sibling keeps all of it."""
    service, query = backend.service, backend.query
    writer = principal()
    service.write(writer, body(id="erased", content="Erase this email."))
    service.write(writer, body(id="expired", content="Expire this email.", ttl_seconds=60))
    service.write(writer, body(id="rejected", content="Reject this.", trust="untrusted"))
    service.reject(reviewer(), "rejected", expected_version=1, reason="Rejected email.")
    service.write(writer, body(id="sibling", content="Keep this email."))
    service.erase(principal(name="dpo", scopes={Scope.SUBJECT_FORGET}), "erased")
    backend.clock.advance(seconds=61)
    service.expire_due()
    assert service.apply_retention().destroyed == 2

    assert query("SELECT memory_id FROM item_keys") == [("sibling",)]
    holding = query("SELECT id FROM memories WHERE content IS NOT NULL ORDER BY id")
    assert holding == [("sibling",)]
    indexed = query(
        "SELECT DISTINCT m.id FROM postings AS p JOIN memories AS m ON m.rowid = p.item"
    )
    assert indexed == [("sibling",)]
    keyring = service.keyring
    subject = service.store.subject_key("acme", "customer-1")
    assert subject is not None
    left: list[SealingKey] = [
        keyring.item_sealing_key(subject, k) for k in service.store.item_keys()
    ]
    gone = {"erased", "expired", "rejected"}
    sealed = [
        (s.event.memory_id, s.event.version, blob, purpose)
        for s in service.store.events_after("acme", 0, 100)
        for blob, purpose in sealed_blobs(s.event)
        if s.event.memory_id in gone
    ]
    assert len(sealed) == 4
    for memory_id, version, blob, purpose in sealed:
        for key in left:
            with pytest.raises(CryptoError):
                keyring.open(dataclasses.replace(key, memory_id=memory_id), version, blob, purpose)
    assert service.get(writer, "sibling").content == "Keep this email."
    assert [h.item.id for h in service.search(writer, query_body("email")).items] == ["sibling"]
