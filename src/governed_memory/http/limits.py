"""Request limits: a fixed-window rate limiter per API key; the edge of the app
(:mod:`governed_memory.http.edge`) adds its headers and enforces the streaming body limit.

The rate limiter counts requests per key in windows of ``window`` seconds aligned to the
clock; the ``RateLimit-Limit``, ``RateLimit-Remaining`` and ``RateLimit-Reset`` headers
describe the caller's window on every authenticated response, and a refused request gets
429 with ``Retry-After``. Counts live in this process: the limit is per key *and per
instance*, so N instances behind a load balancer allow a key up to N times the limit
(documented in docs/http-api.md; a shared limiter is planned, SPEC §14).

The body limit counts bytes as they arrive: a declared ``Content-Length`` over the limit
is refused before anything is read, and a streamed body is cut off as soon as it passes
the limit, so an oversized body is never held in memory and never reaches a route;
nothing is written.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from governed_memory.errors import RateLimited

STATE_KEY = "rate_limit"


@dataclass(frozen=True, slots=True)
class RateDecision:
    """Where a key stands in its current window."""

    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The ``RateLimit-*`` headers, as the ASGI response start message carries them."""
        return [
            (b"ratelimit-limit", b"%d" % self.limit),
            (b"ratelimit-remaining", b"%d" % self.remaining),
            (b"ratelimit-reset", b"%d" % self.reset_seconds),
        ]


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
                f"at most {self.limit} requests per {self.window} s per API key, counted by "
                "this server's processes (other instances count their own)",
                retry_after=decision.reset_seconds,
            )


__all__ = ["STATE_KEY", "FixedWindowLimiter", "RateDecision"]
