"""The real HTTP app in the test process, over SQLite in a temp dir, served on a free port.

:func:`serve_app` is the one way tests build and serve the app: the HTTP tests drive it
with raw requests (:class:`Api`, the ``api`` fixtures), the client and MCP tests with the
library's clients (:class:`Served`). Fixtures defined here are registered by the
``conftest.py`` of each folder that imports them.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from governed_memory import Client, Principal
from governed_memory.apikeys import create_api_key, parse_agents, parse_scopes
from governed_memory.client import RetryPolicy
from governed_memory.config import Settings, load_settings
from governed_memory.core.values import Trust
from governed_memory.crypto import Keyring
from governed_memory.http.app import create_app
from governed_memory.http.server import running
from governed_memory.ports import ApiKeys, Clock, Store
from governed_memory.records import ApiKey
from governed_memory.service import MemoryService
from governed_memory.store.sqlite import SQLiteStore
from tests.support.fakes import FakeClock, write_body

ALL_MEMORY_SCOPES = "memory:write,memory:read,memory:review,subject:forget,audit:read"
#: Client retries in tests: quick, and without real sleeping where a test injects ``sleep``.
FAST = RetryPolicy(attempts=4, backoff=0.001, max_backoff=0.002)


def add_key(
    api_keys: ApiKeys,
    tenant: str,
    scopes: str,
    *,
    agents: str = "*",
    trust: str = "trusted",
    now: datetime,
    principal: str | None = None,
) -> tuple[ApiKey, str]:
    """A new API key with these grants (comma-separated, as ``gmem keys create`` takes
    them), stored in ``api_keys``; its record and bearer token. Without ``principal`` the
    key is its own principal, as a key made before principals existed."""
    record, token = create_api_key(
        tenant,
        parse_agents(agents.split(",")),
        parse_scopes(scopes.split(",")),
        Trust(trust),
        now,
        principal=principal,
    )
    api_keys.add_api_key(record)
    return record, token


def add_legacy_key(api_keys: ApiKeys, tenant: str, scopes: str, *, now: datetime) -> str:
    """A key with scopes no new key may have (``admin``), as keys made earlier carry them,
    stored in ``api_keys``; its bearer token."""
    record, token = create_api_key(tenant, None, frozenset(), Trust.UNTRUSTED, now)
    legacy = dataclasses.replace(record, scopes=parse_scopes(scopes.split(",")))
    api_keys.add_api_key(legacy)
    return token


def settings_for(directory: Path, **overrides: Any) -> Settings:
    """Settings for a test app with its data in ``directory``."""
    return load_settings(data_dir=directory, **overrides)


@dataclass(frozen=True)
class Serving:
    """An app served in this process, and what it runs on."""

    url: str
    app: FastAPI
    service: MemoryService
    store: Store


def serve_app(
    directory: Path,
    stack: ExitStack,
    *,
    store: Store | None = None,
    clock: Clock | None = None,
    **overrides: Any,
) -> Serving:
    """Serve the real app over ``store`` (default: fresh SQLite in ``directory``) until
    ``stack`` closes; settings may be overridden."""
    settings = settings_for(directory, **overrides)
    if store is None:
        # NORMAL: these tests are about the edges, not durability; FULL fsyncs are slow here.
        store = SQLiteStore(directory / "gmem.sqlite3", synchronous="NORMAL")
        stack.callback(store.close)
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=clock)
    app = create_app(settings, service=service, api_keys=store)
    return Serving(stack.enter_context(running(app)), app, service, store)


# -- raw HTTP ------------------------------------------------------------------------------


@dataclass
class Api:
    """A running app and what a test needs to drive it with raw requests."""

    client: httpx.Client
    app: FastAPI
    service: MemoryService
    store: Store
    clock: FakeClock

    def key(
        self,
        scopes: str = ALL_MEMORY_SCOPES,
        *,
        tenant: str = "acme",
        agents: str = "*",
        trust: str = "trusted",
        principal: str | None = None,
    ) -> dict[str, str]:
        """Authorization headers of a new key with these grants (its own principal unless
        one is named)."""
        _, token = add_key(
            self.store,
            tenant,
            scopes,
            agents=agents,
            trust=trust,
            now=self.clock.now(),
            principal=principal,
        )
        return {"Authorization": f"Bearer {token}"}

    def legacy_key(self, scopes: str, *, tenant: str = "acme") -> dict[str, str]:
        """Authorization headers of a key carrying scopes no new key may (``admin``)."""
        token = add_legacy_key(self.store, tenant, scopes, now=self.clock.now())
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


MakeApi = Callable[..., Api]


def build_api(
    directory: Path, stack: ExitStack, store: Store | None = None, **overrides: Any
) -> Api:
    """Serve the real app over ``store`` (default: fresh SQLite) until ``stack`` closes."""
    clock = FakeClock()
    served = serve_app(directory, stack, store=store, clock=clock, **overrides)
    client = stack.enter_context(httpx.Client(base_url=served.url, timeout=30))
    return Api(client, served.app, served.service, served.store, clock)


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


# -- through the library's client ----------------------------------------------------------


@dataclass
class Served:
    """A running app, its service, and keys and clients made for one test."""

    url: str
    service: MemoryService
    store: Store
    stack: ExitStack
    tenant: str = "acme"
    principals: dict[str, Principal] = field(default_factory=dict)

    def key(
        self, scopes: str = ALL_MEMORY_SCOPES, *, agents: str = "*", trust: str = "trusted"
    ) -> str:
        """A new API key of this test's tenant with these grants."""
        now = datetime.now(UTC)
        record, token = add_key(
            self.store, self.tenant, scopes, agents=agents, trust=trust, now=now
        )
        self.principals[token] = record.principal()
        return token

    def client(self, api_key: str | None = None, **options: Any) -> Client:
        """A client of this app, closed when the test ends."""
        options.setdefault("retry", FAST)
        return self.stack.enter_context(Client(self.url, api_key, **options))


MakeServed = Callable[..., Served]


def serve_for_clients(
    directory: Path, stack: ExitStack, *, store: Store | None = None, **overrides: Any
) -> Served:
    """Serve the real app (see :func:`serve_app`) for tests that use the library's clients."""
    served = serve_app(directory, stack, store=store, **overrides)
    return Served(served.url, served.service, served.store, stack)


__all__ = [
    "ALL_MEMORY_SCOPES",
    "FAST",
    "Api",
    "MakeApi",
    "MakeServed",
    "Served",
    "Serving",
    "add_key",
    "add_legacy_key",
    "admin",
    "api",
    "build_api",
    "make_api",
    "serve_app",
    "serve_for_clients",
    "settings_for",
]
