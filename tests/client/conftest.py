"""Fixtures for the client tests: the real HTTP app over SQLite, served on a free port
(:mod:`tests.support.api`), and transports that fail on purpose."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from governed_memory import Client
from tests.support.api import MakeServed, Served, serve_for_clients


@pytest.fixture
def make_served(tmp_path: Path) -> Iterator[MakeServed]:
    """Serve apps over SQLite (or a given store) in ``tmp_path``; settings may be overridden."""
    with ExitStack() as stack:
        yield lambda **options: serve_for_clients(tmp_path / secrets.token_hex(4), stack, **options)


@pytest.fixture(scope="module")
def shared_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One app with default settings per module (tests keep apart by tenant)."""
    with ExitStack() as stack:
        yield serve_for_clients(tmp_path_factory.mktemp("app"), stack)


@pytest.fixture
def served(shared_app: Served) -> Iterator[Served]:
    """The shared app, seen through a tenant of this test's own, and clients closed after it."""
    with ExitStack() as stack:
        yield replace(shared_app, stack=stack, tenant="t-" + secrets.token_hex(6), principals={})


@pytest.fixture
def client(served: Served) -> Client:
    """A client with a trusted key of the test's tenant holding every memory scope."""
    return served.client(served.key())


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
