"""When a request that failed to reach the service is sent again, and how long to wait.

Only requests that cannot do anything twice are retried (see ``Call.retryable``), and only
after a transport failure: the connection was refused or dropped, or timed out. An answer
from the service, even an error, is never retried: it is the service's word.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpx

from governed_memory.errors import StoreUnavailable

#: Transport failures after which the request may not have been processed, or was not.
RETRYABLE: tuple[type[Exception], ...] = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter.

    A call is tried at most ``attempts`` times. Before retry *n* (1-based) the client
    sleeps a random time between 0 and ``min(max_backoff, backoff * 2 ** (n - 1))``
    seconds, so many clients that failed together do not come back together.
    ``RetryPolicy(attempts=1)`` turns retries off.
    """

    attempts: int = 4
    backoff: float = 0.1
    max_backoff: float = 2.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("backoff and max_backoff must not be negative")

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry)."""
        cap = min(self.max_backoff, self.backoff * 2 ** (retry - 1))
        return (rng or _RNG).uniform(0.0, cap)


_RNG = random.Random()  # noqa: S311 - jitter spreads load; it protects no secret


def unreachable(base_url: str, error: Exception, attempts: int) -> StoreUnavailable:
    """The error raised when the service could not be reached (no request content in it)."""
    tries = "once" if attempts == 1 else f"{attempts} times"
    return StoreUnavailable(
        f"the governed-memory service at {base_url} could not be reached "
        f"({type(error).__name__}, tried {tries})"
    )


__all__ = ["RETRYABLE", "RetryPolicy", "unreachable"]
