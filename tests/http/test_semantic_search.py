"""Semantic recall over HTTP and through the client: the semantic score part is reported."""

from __future__ import annotations

import secrets
from pathlib import Path

import httpx

from governed_memory import Client
from governed_memory.crypto import Keyring
from governed_memory.http.app import create_app
from governed_memory.http.server import running
from governed_memory.service import MemoryService
from governed_memory.service.indexing import SearchSettings
from governed_memory.store.sqlite import SQLiteStore
from tests.support.api import add_key, settings_for
from tests.support.embedder import FakeEmbedder
from tests.support.fakes import FakeClock, write_body


def test_a_search_reports_its_semantic_part_over_http_and_the_client(tmp_path: Path) -> None:
    """With semantic recall on, POST /v1/search finds by meaning and every hit's
    score_parts has lexical, semantic, confidence and recency; the client reads them."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="NORMAL")
    clock = FakeClock()
    search = SearchSettings(embedder=FakeEmbedder())
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=clock, search=search)
    app = create_app(settings_for(tmp_path), service=service, api_keys=store)
    _, token = add_key(store, "acme", "memory:write,memory:read", now=clock.now())
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with running(app) as url, httpx.Client(base_url=url, timeout=30) as http:
            written = http.put(
                "/v1/memories/car", json=write_body(content="A red car."), headers=headers
            )
            assert written.status_code == 201, written.text
            found = http.post(
                "/v1/search",
                json={"agent_id": "support-bot", "purpose": "support", "query": "automobile"},
                headers=headers,
            )
            assert found.status_code == 200, found.text
            (hit,) = found.json()["items"]
            assert set(hit["score_parts"]) == {"lexical", "semantic", "confidence", "recency"}
            with Client(url, token) as client:
                (same,) = client.search("support-bot", "support", "automobile").items
            assert same.item.id == "car"
            assert same.score_parts["semantic"] == hit["score_parts"]["semantic"] > 0
    finally:
        store.close()
