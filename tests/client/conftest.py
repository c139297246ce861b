"""Fixtures for the client tests: the real HTTP app over SQLite, served on a free port."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from governed_memory import Client, Principal
from governed_memory.apikeys import create_api_key, parse_agents, parse_scopes
from governed_memory.client import RetryPolicy
from governed_memory.config import load_settings
from governed_memory.core.values import Trust
from governed_memory.crypto import Keyring
from governed_memory.http.app import create_app
from governed_memory.http.server import running
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from governed_memory.store.sqlite import SQLiteStore

EVERY_SCOPE = "memory:write,memory:read,memory:review,subject:forget,audit:read"
#: Retries in tests: quick, and without real sleeping where a test injects ``sleep``.
FAST = RetryPolicy(attempts=4, backoff=0.001, max_backoff=0.002)


@dataclass
class Served:
    """A running app, its service, and keys and clients made for one test."""

    url: str
    service: MemoryService
    store: Store
    stack: ExitStack
    tenant: str = "acme"
    principals: dict[str, Principal] = field(default_factory=dict)

    def key(self, scopes: str = EVERY_SCOPE, *, agents: str = "*", trust: str = "trusted") -> str:
        """A new API key of this test's tenant with these grants."""
        record, token = create_api_key(
            self.tenant,
            parse_agents(agents.split(",")),
            parse_scopes(scopes.split(",")),
            Trust(trust),
            datetime.now(UTC),
        )
        self.store.add_api_key(record)
        self.principals[token] = record.principal()
        return token

    def client(self, api_key: str | None = None, **options: Any) -> Client:
        """A client of this app, closed when the test ends."""
        options.setdefault("retry", FAST)
        return self.stack.enter_context(Client(self.url, api_key, **options))


MakeServed = Callable[..., Served]


def serve_app(
    directory: Path, stack: ExitStack, *, store: Store | None = None, **overrides: Any
) -> Served:
    """Serve the real app over SQLite in ``directory`` (or over ``store``) until ``stack`` ends."""
    settings = load_settings(data_dir=directory, **overrides)
    if store is None:
        # NORMAL: these tests are about the client, not durability.
        store = SQLiteStore(directory / "gmem.sqlite3", synchronous="NORMAL")
        stack.callback(store.close)
    service = MemoryService(store, Keyring(secrets.token_bytes(32)))
    url = stack.enter_context(running(create_app(settings, service=service)))
    return Served(url, service, store, stack)


@pytest.fixture
def make_served(tmp_path: Path) -> Iterator[MakeServed]:
    """Serve apps over SQLite (or a given store) in ``tmp_path``; settings may be overridden."""
    with ExitStack() as stack:
        yield lambda **options: serve_app(tmp_path / secrets.token_hex(4), stack, **options)


@pytest.fixture(scope="module")
def shared_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One app with default settings per module (tests keep apart by tenant)."""
    with ExitStack() as stack:
        yield serve_app(tmp_path_factory.mktemp("app"), stack)


@pytest.fixture
def served(shared_app: Served) -> Iterator[Served]:
    """The shared app, seen through a tenant of this test's own, and clients closed after it."""
    with ExitStack() as stack:
        yield replace(shared_app, stack=stack, tenant="t-" + secrets.token_hex(6), principals={})


@pytest.fixture
def client(served: Served) -> Client:
    """A client with a trusted key of the test's tenant holding every memory scope."""
    return served.client(served.key())


def fact(**overrides: Any) -> dict[str, Any]:
    """Keyword arguments of a valid write: a trusted fact about customer-1 for support-bot."""
    fields: dict[str, Any] = {
        "agent_id": "support-bot",
        "subject_id": "customer-1",
        "purpose": "support",
        "kind": "fact",
        "content": "The customer prefers email over phone calls.",
        "provenance": {"source": "crm", "ref": "ticket-1"},
        "trust": "trusted",
        "confidence": 0.9,
    }
    fields.update(overrides)
    return fields


class FlakyTransport(httpx.BaseTransport):
    """A real transport that fails on purpose: before sending, or after the answer was made.

    ``refuse`` requests fail with a refused connection (the service saw nothing); then
    ``drop`` requests reach the service but lose their answer on the way back.
    """

    def __init__(self, refuse: int = 0, drop: int = 0) -> None:
        self.refuse = refuse
        self.drop = drop
        self.sent: list[httpx.Request] = []
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        if self.refuse > 0:
            self.refuse -= 1
            raise httpx.ConnectError("connection refused", request=request)
        response = self._inner.handle_request(request)
        if self.drop > 0:
            self.drop -= 1
            response.read()
            response.close()
            raise httpx.ReadError("connection reset while reading the answer", request=request)
        return response

    def close(self) -> None:
        self._inner.close()


class AsyncFlakyTransport(httpx.AsyncBaseTransport):
    """The ``async`` twin of :class:`FlakyTransport`."""

    def __init__(self, refuse: int = 0, drop: int = 0) -> None:
        self.refuse = refuse
        self.drop = drop
        self.sent: list[httpx.Request] = []
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        if self.refuse > 0:
            self.refuse -= 1
            raise httpx.ConnectError("connection refused", request=request)
        response = await self._inner.handle_async_request(request)
        if self.drop > 0:
            self.drop -= 1
            await response.aread()
            await response.aclose()
            raise httpx.ReadError("connection reset while reading the answer", request=request)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
