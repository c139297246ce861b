"""Rate limits per key with RateLimit-* headers and 429; the body limit read as it streams."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from governed_memory.http.edge import EdgeMiddleware
from governed_memory.http.limits import FixedWindowLimiter
from tests.support.api import MakeApi
from tests.support.fakes import query as search_body
from tests.support.fakes import write_body


def test_the_limiter_allows_limit_requests_per_window() -> None:
    """A key gets ``limit`` requests in a window, then none until the next window."""
    now = [1000.0]
    limiter = FixedWindowLimiter(3, 60, clock=lambda: now[0])
    decisions = [limiter.hit("k") for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert [d.remaining for d in decisions] == [2, 1, 0, 0]
    assert decisions[-1].reset_seconds == 20  # the window 960..1020 ends in 20 s
    now[0] = 1020.0
    assert limiter.hit("k").allowed


def test_the_limiter_counts_each_key_apart() -> None:
    """One key running out does not limit another."""
    limiter = FixedWindowLimiter(1, 60, clock=lambda: 5.0)
    assert limiter.hit("a").allowed
    assert not limiter.hit("a").allowed
    assert limiter.hit("b").allowed


def test_responses_carry_ratelimit_headers(make_api: MakeApi) -> None:
    """Every authenticated response says the limit, what remains and when it resets."""
    api = make_api(rate_limit_requests=5, rate_limit_window_seconds=60)
    response = api.client.post("/v1/search", json=search_body(), headers=api.key())
    assert response.status_code == 200
    assert response.headers["RateLimit-Limit"] == "5"
    assert response.headers["RateLimit-Remaining"] == "4"
    assert 1 <= int(response.headers["RateLimit-Reset"]) <= 60


def test_over_the_limit_is_429_with_retry_after(make_api: MakeApi) -> None:
    """The request after the limit is a 429 problem with Retry-After; other keys go on."""
    api = make_api(rate_limit_requests=2, rate_limit_window_seconds=3600)
    key = api.key()
    for _ in range(2):
        assert api.client.post("/v1/search", json=search_body(), headers=key).status_code == 200
    refused = api.client.post("/v1/search", json=search_body(), headers=key)
    assert refused.status_code == 429
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["type"] == "urn:gmem:problem:rate-limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= 3600
    assert refused.headers["RateLimit-Remaining"] == "0"
    other = api.client.post("/v1/search", json=search_body(), headers=api.key())
    assert other.status_code == 200


def test_a_declared_oversized_body_is_413_and_nothing_is_written(make_api: MakeApi) -> None:
    """A Content-Length over the limit is refused before reading; nothing is written."""
    api = make_api(max_body_bytes=1024)
    body = write_body(content="x" * 2000)
    response = api.client.post("/v1/memories", json=body, headers=api.key())
    assert response.status_code == 413
    assert response.json()["type"] == "urn:gmem:problem:payload-too-large"
    assert api.store.head() == 0


def test_a_streamed_oversized_body_is_cut_off_with_413(make_api: MakeApi) -> None:
    """A chunked body without Content-Length is refused as soon as it passes the limit."""
    api = make_api(max_body_bytes=1024)

    def chunks() -> Iterator[bytes]:
        yield b'{"agent_id": "support-bot", "content": "'
        for _ in range(64):
            yield b"y" * 512
        yield b'"}'

    headers = api.key() | {"Content-Type": "application/json"}
    response = api.client.post("/v1/memories", content=chunks(), headers=headers)
    assert response.status_code == 413
    assert response.json()["type"] == "urn:gmem:problem:payload-too-large"
    assert api.store.head() == 0


def test_a_body_within_the_limit_is_accepted(make_api: MakeApi) -> None:
    """The limit refuses only what is over it."""
    api = make_api(max_body_bytes=4096)
    response = api.client.post("/v1/memories", json=write_body(), headers=api.key())
    assert response.status_code == 201


def test_the_body_limit_stops_reading_at_the_limit() -> None:
    """The middleware stops pulling chunks once the limit is passed: the rest is never read."""
    pulled: list[int] = []
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        pulled.append(1)
        return {"type": "http.request", "body": b"z" * 512, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def reads_everything(scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass

    middleware = EdgeMiddleware(reads_everything, max_bytes=1024, metrics=None)
    scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
    asyncio.run(middleware(scope, receive, send))
    assert len(pulled) == 3  # 512 + 512 fit; the third chunk passes the limit
    assert sent[0]["status"] == 413
