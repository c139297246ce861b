"""Request limits: a fixed-window rate limiter per API key, and a streaming body limit.

The rate limiter counts requests per key in windows of ``window`` seconds aligned to the
clock; the ``RateLimit-Limit``, ``RateLimit-Remaining`` and ``RateLimit-Reset`` headers
describe the caller's window on every authenticated response, and a refused request gets
429 with ``Retry-After``. Counts live in this process: the limit is per key *and per
instance*, so N instances behind a load balancer allow a key up to N times the limit
(documented in docs/http-api.md; a shared limiter is planned, SPEC §14).

The body limit is an ASGI middleware that counts bytes as they arrive: a declared
``Content-Length`` over the limit is refused before anything is read, and a streamed body
is cut off as soon as it passes the limit, so an oversized body is never held in memory
and never reaches a route; nothing is written.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from governed_memory.errors import PayloadTooLarge, RateLimited
from governed_memory.http.problems import error_response

STATE_KEY = "rate_limit"


@dataclass(frozen=True, slots=True)
class RateDecision:
    """Where a key stands in its current window."""

    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int

    def headers(self) -> dict[str, str]:
        return {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset_seconds),
        }


class FixedWindowLimiter:
    """At most ``limit`` requests per key in each window of ``window`` seconds, counted in
    this process only."""

    def __init__(self, limit: int, window: int, clock: Callable[[], float] = time.time) -> None:
        if limit < 1 or window < 1:
            raise ValueError("the limit and the window must be positive")
        self.limit = limit
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[int, int]] = {}

    def hit(self, key: str) -> RateDecision:
        """Count one request of ``key`` and say whether it is allowed."""
        now = self._clock()
        window = int(now // self.window)
        reset = max(1, math.ceil((window + 1) * self.window - now))
        with self._lock:
            if len(self._counts) > 10_000:
                self._counts = {k: c for k, c in self._counts.items() if c[0] == window}
            seen_window, count = self._counts.get(key, (window, 0))
            if seen_window != window:
                count = 0
            allowed = count < self.limit
            if allowed:
                count += 1
            self._counts[key] = (window, count)
        return RateDecision(allowed, self.limit, self.limit - count, reset)

    def check(self, key: str, state: dict[str, object]) -> None:
        """Count a request, note the decision for the headers, raise 429 when refused."""
        decision = self.hit(key)
        state[STATE_KEY] = decision
        if not decision.allowed:
            raise RateLimited(
                f"at most {self.limit} requests per {self.window} s per API key on this instance",
                retry_after=decision.reset_seconds,
            )


class RateLimitHeadersMiddleware:
    """Adds the ``RateLimit-*`` headers of the authenticated key to its response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                decision = (scope.get("state") or {}).get(STATE_KEY)
                if isinstance(decision, RateDecision):
                    extra = [
                        (name.lower().encode("latin-1"), value.encode("latin-1"))
                        for name, value in decision.headers().items()
                    ]
                    message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class _BodyTooLarge(Exception):
    """Raised inside ``receive`` to stop the app reading an oversized body."""


class BodyLimitMiddleware:
    """Refuses request bodies over ``max_bytes`` with 413, counting while they stream."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"the request body is over the limit of {self.max_bytes} bytes")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await error_response(self._too_large())(scope, receive, send)
            return
        received = 0
        refused = False
        started = False

        async def limited_receive() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    refused = True
                    raise _BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the app's answer to a cut-off body is replaced by the 413
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except _BodyTooLarge:
            pass
        except Exception:
            if not refused:
                raise
        if refused and not started:
            await error_response(self._too_large())(scope, receive, send)


__all__ = [
    "BodyLimitMiddleware",
    "FixedWindowLimiter",
    "RateDecision",
    "RateLimitHeadersMiddleware",
]
