"""Forget is erasure, and sealed content is authenticated (SPEC §7, §12).

The first tests run the real ``gmem serve``: a subject's memories carry a canary string
(in content, in a rewrite, in a rejection reason, in the search index of a promoted item);
after forgetting the subject the canary is absent from every file of the data directory,
from ``gmem export``, from the server's log and from ``/metrics``; the subject's key row is
gone and no remaining key opens its ciphertext. The last tests tamper with stored
ciphertext through the store: a flipped bit or a blob moved to another item is an error,
never another plaintext.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import sqlite3
import uuid
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from governed_memory.analysis import Analyzer
from governed_memory.core.events import MemoryRejected, MemoryWritten
from governed_memory.core.values import Scope
from governed_memory.crypto import (
    Keyring,
    load_or_create_key_file,
)
from governed_memory.errors import CryptoError, IdempotencyKeyReused
from governed_memory.ports import Store
from governed_memory.records import SearchRequest
from governed_memory.service import MemoryService
from governed_memory.service.indexing import SearchSettings, unit
from governed_memory.store.sqlite import SQLiteStore
from governed_memory.store.sqlite.index_rows import pack, unpack
from governed_memory.store.sqlite.sql import ITEM_CONTENT
from tests.conftest import make_store, postgres_dsn
from tests.reliability.servers import ServerProcess, create_key, gmem
from tests.support.api import Api
from tests.support.embedder import FakeEmbedder
from tests.support.fakes import FakeClock, principal, write_body

CANARY = "erasecanary" + secrets.token_hex(8)
KEEP = "keepcanary" + secrets.token_hex(8)
WRITER = principal()


@dataclass
class Forgotten:
    """A data directory whose subject ``victim`` was forgotten by the real server."""

    data: Path
    log: Path
    metrics: str
    export: str
    responses: list[str]


def encodings(text: str) -> list[bytes]:
    """The byte forms a string could take in a file."""
    return [text.encode(codec) for codec in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le")]


@pytest.fixture(scope="module")
def forgotten(tmp_path_factory: pytest.TempPathFactory) -> Forgotten:
    """Write, rewrite, reject, promote and index a canary; forget its subject; stop."""
    root = tmp_path_factory.mktemp("erasure")
    data, log = root / "data", root / "server.log"
    writer = {"Authorization": f"Bearer {create_key(data)}"}
    reviewer = {"Authorization": "Bearer " + create_key(data, scopes="memory:review")}
    responses: list[str] = []
    with ServerProcess(data, log, {"GMEM_LOG_LEVEL": "DEBUG"}) as server:
        client = httpx.Client(base_url=server.url, timeout=30)

        def call(method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
            response = client.request(method, path, json=body, headers=headers)
            assert response.status_code < 300, response.text
            responses.append(response.text)
            return response.json()

        victim = {"subject_id": "victim", "content": f"The locker code is {CANARY}."}
        call("PUT", "/v1/memories/m1", write_body(**victim), writer)
        call(
            "PUT",
            "/v1/memories/m1",
            write_body(
                **victim | {"content": f"Corrected: {CANARY} opens locker 2."}, expected_version=1
            ),
            writer,
        )
        call("PUT", "/v1/memories/m2", write_body(**victim, trust="untrusted"), writer)
        call(
            "POST",
            "/v1/memories/m2/reject",
            {"expected_version": 1, "reason": f"no {CANARY}"},
            reviewer,
        )
        call("PUT", "/v1/memories/m3", write_body(**victim, trust="untrusted"), writer)
        call("POST", "/v1/memories/m3/promote", {"expected_version": 1}, reviewer)
        keep = {"subject_id": "bystander", "content": f"The bystander code is {KEEP}."}
        call("PUT", "/v1/memories/k1", write_body(**keep), writer)
        found = call(
            "POST",
            "/v1/search",
            {"agent_id": "support-bot", "purpose": "support", "query": CANARY},
            writer,
        )
        assert {item["id"] for item in found["items"]} == {"m1", "m3"}  # really indexed
        result = call("POST", "/v1/subjects/victim/forget", {}, writer)
        assert result["affected"] == 3
        after = call(
            "POST",
            "/v1/search",
            {"agent_id": "support-bot", "purpose": "support", "query": CANARY},
            writer,
        )
        assert after["items"] == []
        for memory_id in ("m1", "m2", "m3"):
            item = call("GET", f"/v1/memories/{memory_id}", None, writer)
            assert (item["status"], item["content"]) == ("deleted", None)
        metrics = client.get("/metrics").text
        assert "gmem_" in metrics or "_total" in metrics
        client.close()
    export = gmem(data, "export", "--output", "-")
    return Forgotten(data, log, metrics, export, responses)


def test_the_canary_is_in_no_file_of_the_data_directory(forgotten: Forgotten) -> None:
    """Database, WAL, SHM and key file: not one byte form of the canary, and the bystander's
    content is sealed too (it is never there in plaintext)."""
    files = [p for p in forgotten.data.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"gmem.sqlite3", "master.key"}
    for path in files:
        raw = path.read_bytes()
        for form in encodings(CANARY) + encodings(KEEP):
            assert form not in raw, path.name


def indexed(word: str) -> str:
    """The term the service indexes for ``word``: the random hex tail may end in a suffix
    the stemmer strips ("…ed", "…e"), so the test asks the service's own analyzer."""
    [term] = Analyzer().index_terms(word)
    return term


def test_the_subject_key_and_its_search_postings_are_gone(forgotten: Forgotten) -> None:
    """No key row for the subject, no postings or documents with its terms; the bystander
    keeps all three."""
    keyring = Keyring(load_or_create_key_file(forgotten.data))
    canary_term, keep_term = keyring.term_ids("acme", [indexed(CANARY), indexed(KEEP)])
    conn = sqlite3.connect(forgotten.data / "gmem.sqlite3")
    try:
        subjects = {row[0] for row in conn.execute("SELECT subject_id FROM subject_keys")}
        assert subjects == {"bystander"}
        count = "SELECT count(*) FROM postings WHERE term = ?"
        assert conn.execute(count, (canary_term,)).fetchone() == (0,)
        assert conn.execute(count, (keep_term,)).fetchone() == (1,)
        documents = [
            unpack(terms, tfs) for terms, tfs in conn.execute("SELECT terms, tfs FROM search_docs")
        ]  # each item's term ids and frequencies: none of the forgotten subject's is left
        assert [canary_term in doc for doc in documents] == [False]
        assert [doc.get(keep_term) for doc in documents] == [1]
        contents = conn.execute(
            "SELECT count(*) FROM memories WHERE subject_id = 'victim' AND content IS NOT NULL"
        ).fetchone()
        assert contents == (0,)
    finally:
        conn.close()


def test_no_remaining_key_opens_the_forgotten_ciphertext(forgotten: Forgotten) -> None:
    """The log still holds the sealed blobs; with the master key and every key left (each
    subject key, each item key it wraps), none opens; the subject's item keys are gone."""
    keyring = Keyring(load_or_create_key_file(forgotten.data))
    store = SQLiteStore.in_directory(forgotten.data)
    try:
        assert store.subject_key("acme", "victim") is None
        assert [key.subject_id for key in store.item_keys()] == ["bystander"]
        subjects = {key.subject_id: key for key in store.subject_keys()}
        keys = [keyring.subject_sealing_key(key, "") for key in subjects.values()] + [
            keyring.item_sealing_key(subjects[key.subject_id], key) for key in store.item_keys()
        ]
        sealed = [
            (stored.event.memory_id, stored.event.version, blob, purpose)
            for stored in store.events_after("acme", 0, 1000)
            for blob, purpose in sealed_blobs(stored.event)
            if stored.event.memory_id in {"m1", "m2", "m3"}
        ]
    finally:
        store.close()
    assert len(sealed) == 5  # m1 twice, m2 and m3 written, m2's rejection reason
    for memory_id, version, blob, purpose in sealed:
        for key in keys:
            with pytest.raises(CryptoError):
                keyring.open(dataclasses.replace(key, memory_id=memory_id), version, blob, purpose)


def sealed_blobs(event: object) -> list[tuple[bytes, str]]:
    """The sealed blobs an event carries, each with its purpose (content, reason)."""
    if isinstance(event, MemoryWritten):
        return [(event.content, "content")]
    if isinstance(event, MemoryRejected) and event.reason is not None:
        return [(event.reason, "reason")]
    return []


def test_the_canary_is_in_no_export_log_metric_or_response(forgotten: Forgotten) -> None:
    """gmem export, the server's (DEBUG) log, /metrics and every answer after the writes."""
    for text in (forgotten.export, forgotten.log.read_text(), forgotten.metrics):
        assert CANARY not in text
        assert KEEP not in text
    for text in forgotten.responses[-4:]:  # the search and the reads after the forget
        assert CANARY not in text
    records = [json.loads(line) for line in forgotten.export.splitlines()]
    keys = [r["subject_id"] for r in records if r["record"] == "subject_key"]
    assert keys == ["bystander"]  # the victim's key is not exported: it no longer exists
    assert any(r["record"] == "event" and r.get("memory_id") == "m1" for r in records)


def test_a_keyed_write_retried_after_its_subject_was_forgotten_replays_without_content(
    tmp_path: Path,
) -> None:
    """The retry cannot be compared by content any more (the hash died with the key): it
    gets the first answer without content, writes nothing; another subject is still 409."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="NORMAL")
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
    try:
        request = body("a", "s1", "Written once, then forgotten.")
        first = service.write(WRITER, request, idempotency_key="k")
        service.forget_subject(WRITER, "s1")
        head = store.head()
        again = service.write(WRITER, request, idempotency_key="k")
        assert again == dataclasses.replace(
            first, item=dataclasses.replace(first.item, content=None)
        )
        with pytest.raises(IdempotencyKeyReused):
            service.write(WRITER, body("a", "s2", "Another subject."), idempotency_key="k")
        assert store.head() == head
    finally:
        store.close()


# -- tampering ---------------------------------------------------------------------------

Tamper = Callable[[str, bytes | None], None]
Read = Callable[[str], bytes]


@dataclass
class Tamperable:
    """A service over a real database, and raw access to its ``memories.content``."""

    service: MemoryService
    read: Read
    write: Tamper
    drift: Callable[[str], None]  # each term frequency of the item's document + 1
    postings: Callable[[str], int]  # how many postings the item has


@pytest.fixture(params=["sqlite", "postgres"])
def tamperable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Tamperable]:
    """SQLite in a temp dir, or a fresh PostgreSQL schema."""
    store: Store
    if request.param == "sqlite":
        store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="NORMAL")
        path = tmp_path / "gmem.sqlite3"

        def read(memory_id: str) -> bytes:  # the row's copy, or its compact event's
            with sqlite3.connect(path) as conn:
                row = conn.execute(_ITEM_CONTENT, (memory_id,))
                return bytes(row.fetchone()[0])

        def write(memory_id: str, blob: bytes | None) -> None:  # a copy in the row wins
            with sqlite3.connect(path) as conn:
                conn.execute("UPDATE memories SET content = ? WHERE id = ?", (blob, memory_id))

        def drift(memory_id: str) -> None:
            with sqlite3.connect(path) as conn:
                rowid = conn.execute(_ROWID, (memory_id,)).fetchone()[0]
                terms, tfs = conn.execute(
                    "SELECT terms, tfs FROM search_docs WHERE item = ?", (rowid,)
                ).fetchone()
                bumped = {term: tf + 1 for term, tf in unpack(terms, tfs).items()}
                conn.execute(
                    "UPDATE search_docs SET tfs = ? WHERE item = ?", (pack(bumped)[1], rowid)
                )

        def postings(memory_id: str) -> int:
            with sqlite3.connect(path) as conn:
                query = _POSTINGS.replace("%s", "?")
                return int(conn.execute(query, (memory_id,)).fetchone()[0])

        yield _tamperable(store, read, write, drift, postings)
        store.close()
        return
    dsn = postgres_dsn()
    assert dsn is not None
    from governed_memory.store.postgres import PostgresStore

    schema = "gmem_test_" + uuid.uuid4().hex[:12]
    pg = PostgresStore(dsn, schema=schema)
    table = sql.Identifier(schema, "memories")

    def pg_read(memory_id: str) -> bytes:
        with psycopg.connect(dsn) as conn:
            query = sql.SQL("SELECT content FROM {} WHERE id = %s").format(table)
            row = conn.execute(query, (memory_id,)).fetchone()
            assert row is not None
            return bytes(row[0])

    def pg_write(memory_id: str, blob: bytes | None) -> None:
        with psycopg.connect(dsn) as conn:
            query = sql.SQL("UPDATE {} SET content = %s WHERE id = %s").format(table)
            conn.execute(query, (blob, memory_id))

    def pg_drift(memory_id: str) -> None:
        with psycopg.connect(dsn) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            conn.execute(
                "UPDATE search_docs SET tfs = (SELECT array_agg(tf + 1 ORDER BY n) "
                "FROM unnest(tfs) WITH ORDINALITY AS u (tf, n)) "
                "WHERE item = (SELECT rowid FROM memories WHERE id = %s)",
                (memory_id,),
            )

    def pg_postings(memory_id: str) -> int:
        with psycopg.connect(dsn) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            row = conn.execute(_POSTINGS, (memory_id,)).fetchone()
            assert row is not None
            return int(row[0])

    try:
        yield _tamperable(pg, pg_read, pg_write, pg_drift, pg_postings)
    finally:
        pg.drop_schema()
        pg.close()


_ROWID = "SELECT rowid FROM memories WHERE id = ?"
_ITEM_CONTENT = f"SELECT {ITEM_CONTENT} FROM memories AS m WHERE m.id = ?"  # noqa: S608
_POSTINGS = "SELECT count(*) FROM postings WHERE item = (SELECT rowid FROM memories WHERE id = %s)"


def _tamperable(
    store: Store,
    read: Read,
    write: Tamper,
    drift: Callable[[str], None],
    postings: Callable[[str], int],
) -> Tamperable:
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
    return Tamperable(service, read, write, drift, postings)


def body(memory_id: str, subject: str, content: str) -> dict[str, Any]:
    return write_body(id=memory_id, subject_id=subject, content=content)


def test_a_flipped_bit_in_stored_content_is_an_error(tamperable: Tamperable) -> None:
    """One bit changed anywhere in the blob: reading the item raises, no plaintext comes out."""
    tamperable.service.write(WRITER, body("a", "s1", "Alpha content that must stay intact."))
    original = tamperable.read("a")
    for position in (0, 1, 20, 30, len(original) - 1):
        flipped = bytearray(original)
        flipped[position] ^= 0x01
        tamperable.write("a", bytes(flipped))
        with pytest.raises(CryptoError):
            tamperable.service.get(WRITER, "a")
    tamperable.write("a", original)
    assert tamperable.service.get(WRITER, "a").content == "Alpha content that must stay intact."


@pytest.mark.parametrize("same_subject", [True, False], ids=["same-subject", "other-subject"])
def test_content_swapped_between_items_is_an_error(
    tamperable: Tamperable, same_subject: bool
) -> None:
    """A valid blob moved to another item fails authentication instead of decrypting."""
    service = tamperable.service
    service.write(WRITER, body("a", "s1", "Alpha belongs to item a."))
    service.write(WRITER, body("b", "s1" if same_subject else "s2", "Beta belongs to item b."))
    tamperable.write("a", tamperable.read("b"))
    with pytest.raises(CryptoError):
        service.get(WRITER, "a")
    with pytest.raises(CryptoError):
        service.search(WRITER, {"agent_id": "support-bot", "purpose": "support", "query": "alpha"})
    assert service.get(WRITER, "b").content == "Beta belongs to item b."


def test_a_forgotten_item_leaves_no_posting_even_if_its_document_drifted(
    tamperable: Tamperable, caplog: pytest.LogCaptureFixture
) -> None:
    """Postings are deleted by keys recomputed from the search document; when the document
    disagrees with them (here each frequency is off by one), forget still deletes every
    posting of the item (by a scan) and says so in a content-free warning; the bystander's
    postings stay."""
    service = tamperable.service
    service.write(WRITER, body("a", "s1", "Alpha alpha drifted document about a canary."))
    service.write(WRITER, body("b", "s2", "Beta keeps its canary postings."))
    kept = tamperable.postings("b")
    assert tamperable.postings("a") > 0 and kept > 0
    tamperable.drift("a")
    with caplog.at_level("WARNING", logger="governed_memory.store"):
        service.forget_subject(WRITER, "s1")
    assert tamperable.postings("a") == 0
    assert tamperable.postings("b") == kept
    warnings = [r.getMessage() for r in caplog.records if r.name == "governed_memory.store"]
    assert len(warnings) == 1 and "stray postings" in warnings[0]
    assert "lpha" not in warnings[0] and "canary" not in warnings[0]


def test_an_item_forgotten_while_it_is_read_shows_no_content(tamperable: Tamperable) -> None:
    """A read that raced a forget (item read, then its key destroyed) shows null, no error."""
    service = tamperable.service
    service.write(WRITER, body("a", "s1", "Alpha is about to be forgotten."))
    state = service.store.get("acme", "a")
    assert state is not None
    service.forget_subject(WRITER, "s1")
    assert service.decrypt(state) is None


def test_tampered_content_over_http_is_a_500_problem_without_plaintext(
    api: Api, admin: dict[str, str]
) -> None:
    """The API answers a tampered item with a content-free 500 problem, for get and search."""
    api.write(admin, "a", content="Alpha is about to be tampered with.")
    api.write(admin, "b", content="Beta is intact.", subject_id="customer-2")
    assert isinstance(api.store, SQLiteStore)
    with sqlite3.connect(api.store.path) as conn:
        (blob,) = conn.execute(_ITEM_CONTENT, ("b",)).fetchone()
        conn.execute("UPDATE memories SET content = ? WHERE id = 'a'", (blob,))
    search = {"agent_id": "support-bot", "purpose": "support", "query": "alpha"}
    for response in (
        api.client.get("/v1/memories/a", headers=admin),
        api.client.post("/v1/search", json=search, headers=admin),
    ):
        assert response.status_code == 500
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["detail"] == "an unexpected error occurred"
        assert "Alpha" not in response.text
        assert "Beta" not in response.text


# -- vectors (semantic recall) ------------------------------------------------------------


@dataclass
class Vectors:
    """A semantic service over a real database, with raw access to its vector rows."""

    service: MemoryService
    rows: Callable[[], int]
    files: Callable[[], list[Path]]


@pytest.fixture(params=["sqlite", "postgres"])
def vectors(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Vectors]:
    """Semantic recall on (the fake embedder) over SQLite in a temp dir, or PostgreSQL."""
    from governed_memory.store.postgres import PostgresStore

    stores = make_store(request.param, tmp_path)
    store = next(stores)
    if isinstance(store, SQLiteStore):
        path = store.path

        def rows() -> int:
            with sqlite3.connect(path) as conn:
                return int(conn.execute("SELECT count(*) FROM search_vectors").fetchone()[0])

        def files() -> list[Path]:
            return [p for p in tmp_path.iterdir() if p.is_file()]

    else:
        assert isinstance(store, PostgresStore) and store.schema is not None
        dsn, table = postgres_dsn(), sql.Identifier(store.schema, "search_vectors")

        def rows() -> int:
            with psycopg.connect(dsn) as conn:
                found = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
                assert found is not None
                return int(found[0])

        def files() -> list[Path]:
            return []  # the server's files are not ours to read

    search = SearchSettings(embedder=FakeEmbedder())
    service = MemoryService(
        store, Keyring(secrets.token_bytes(32)), clock=FakeClock(), search=search
    )
    try:
        yield Vectors(service, rows, files)
    finally:
        next(stores, None)


def test_forgotten_and_erased_vectors_are_gone_and_unreadable(vectors: Vectors) -> None:
    """A vector is content: never stored in the clear; after a forget and a single-item
    erase, those items' vector rows are gone (SQLite: not a byte of them left in any file)
    and no key left opens the sealed vectors read before; the bystander's vector stays and
    still finds its item."""
    service, embedder = vectors.service, FakeEmbedder()
    canary = f"The car of {CANARY} is red."
    service.write(WRITER, body("m1", "victim", canary))
    service.write(WRITER, body("e1", "bystander", f"The erased car of {CANARY}."))
    service.write(WRITER, body("k1", "bystander", f"The phone of {KEEP} rings."))
    plain = array("f", unit(embedder.embed([canary])[0], embedder)).tobytes()
    request = SearchRequest("acme", "support-bot", "support", [], service.clock.now())
    sealed = {v.memory_id: v for v in service.store.scope_vectors(request)}
    assert set(sealed) == {"m1", "e1", "k1"} and vectors.rows() == 3
    files = vectors.files()
    if files:  # SQLite: the search below would see a sealed vector if it were left
        assert any(sealed["m1"].blob in path.read_bytes() for path in files)
    service.forget_subject(WRITER, "victim")
    service.erase(principal(name="dpo", scopes={Scope.SUBJECT_FORGET}), "e1")
    assert {v.memory_id for v in service.store.scope_vectors(request)} == {"k1"}
    assert vectors.rows() == 1
    for path in vectors.files():
        raw = path.read_bytes()
        for form in (plain, sealed["m1"].blob, sealed["e1"].blob):
            assert form not in raw, path.name
    store, keyring = service.store, service.keyring
    subjects = {key.subject_id: key for key in store.subject_keys()}
    keys = [keyring.subject_sealing_key(key, "") for key in subjects.values()] + [
        keyring.item_sealing_key(subjects[key.subject_id], key) for key in store.item_keys()
    ]
    for gone in ("m1", "e1"):
        for key in keys:
            with pytest.raises(CryptoError):
                keyring.open(
                    dataclasses.replace(key, memory_id=gone),
                    sealed[gone].version,
                    sealed[gone].blob,
                    "vector",
                )
    hits = service.search(
        WRITER, {"agent_id": "support-bot", "purpose": "support", "query": "telephone"}
    )
    assert [hit.item.id for hit in hits.items] == ["k1"]
