"""Fixtures for the HTTP tests: the real app over SQLite in a temp dir, served on a free port."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from governed_memory.apikeys import create_api_key, parse_agents, parse_scopes
from governed_memory.config import Settings, load_settings
from governed_memory.core.values import Trust
from governed_memory.crypto import Keyring
from governed_memory.http.app import create_app
from governed_memory.http.server import running
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from governed_memory.store.sqlite import SQLiteStore
from tests.support.fakes import FakeClock

ALL_MEMORY_SCOPES = "memory:write,memory:read,memory:review,subject:forget,audit:read"


@dataclass
class Api:
    """A running app and what a test needs to drive it."""

    client: httpx.Client
    app: FastAPI
    service: MemoryService
    store: Store
    clock: FakeClock
    tokens: dict[str, str] = field(default_factory=dict)

    def key(
        self,
        scopes: str = ALL_MEMORY_SCOPES,
        *,
        tenant: str = "acme",
        agents: str = "*",
        trust: str = "trusted",
    ) -> dict[str, str]:
        """Authorization headers of a new key with these grants."""
        record, token = create_api_key(
            tenant,
            parse_agents(agents.split(",")),
            parse_scopes(scopes.split(",")),
            Trust(trust),
            self.clock.now(),
        )
        self.store.add_api_key(record)
        return {"Authorization": f"Bearer {token}"}

    def write(
        self, headers: dict[str, str], memory_id: str | None = None, **overrides: Any
    ) -> dict[str, Any]:
        """Write a memory (PUT with an id, else POST) and return the item; fail otherwise."""
        body = write_body(**overrides)
        if memory_id is None:
            response = self.client.post("/v1/memories", json=body, headers=headers)
        else:
            response = self.client.put(f"/v1/memories/{memory_id}", json=body, headers=headers)
        assert response.status_code in (200, 201), response.text
        item: dict[str, Any] = response.json()
        return item


def write_body(**overrides: Any) -> dict[str, Any]:
    """A valid write body: a trusted fact about customer-1 for support-bot."""
    body: dict[str, Any] = {
        "agent_id": "support-bot",
        "subject_id": "customer-1",
        "purpose": "support",
        "kind": "fact",
        "content": "The customer prefers email over phone calls.",
        "provenance": {"source": "crm", "ref": "ticket-1"},
        "trust": "trusted",
        "confidence": 0.9,
        "expected_version": 0,
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


def search_body(**overrides: Any) -> dict[str, Any]:
    """A valid search body for support-bot's support memories."""
    return {"agent_id": "support-bot", "purpose": "support", "query": "email"} | overrides


def settings_for(tmp_path: Path, **overrides: Any) -> Settings:
    """Settings for a test app with its data in ``tmp_path``."""
    return load_settings(data_dir=tmp_path, **overrides)


MakeApi = Callable[..., Api]


def build_api(
    directory: Path, stack: ExitStack, store: Store | None = None, **overrides: Any
) -> Api:
    """Serve the real app over ``store`` (default: fresh SQLite) until ``stack`` closes."""
    settings = settings_for(directory, **overrides)
    if store is None:
        # NORMAL: these tests are about HTTP, not durability; FULL fsyncs are slow here.
        store = SQLiteStore(directory / "gmem.sqlite3", synchronous="NORMAL")
        stack.callback(store.close)
    clock = FakeClock()
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=clock)
    app = create_app(settings, service=service)
    url = stack.enter_context(running(app))
    client = stack.enter_context(httpx.Client(base_url=url, timeout=30))
    return Api(client, app, service, store, clock)


@pytest.fixture
def make_api(tmp_path: Path) -> Iterator[MakeApi]:
    """Build and serve apps over SQLite in ``tmp_path``; settings may be overridden."""
    with ExitStack() as stack:

        def make(*, store: Store | None = None, **overrides: Any) -> Api:
            directory = tmp_path / secrets.token_hex(4)
            return build_api(directory, stack, store, **overrides)

        yield make


@pytest.fixture
def api(make_api: MakeApi) -> Api:
    """The app with default settings over a fresh SQLite store."""
    return make_api()


@pytest.fixture
def admin(api: Api) -> dict[str, str]:
    """Headers of a trusted key of tenant acme with every memory scope."""
    return api.key()
