"""Retries: only calls that cannot act twice, only after transport failures, and bounded."""

from __future__ import annotations

import random

import httpx
import pytest

from governed_memory import Client, StoreUnavailable
from governed_memory.client import RetryPolicy
from governed_memory.client._calls import Call
from tests.client.conftest import FlakyTransport
from tests.support.api import Served
from tests.support.fakes import fact

SLEPT: list[float] = []


@pytest.fixture(autouse=True)
def _forget_sleeps() -> None:
    """Each test starts with no recorded sleep."""
    SLEPT.clear()


def flaky_client(served: Served, transport: FlakyTransport, policy: RetryPolicy) -> Client:
    """A client over ``transport`` whose sleeps are recorded in SLEPT instead of slept."""
    return served.client(served.key(), transport=transport, retry=policy, sleep=SLEPT.append)


def test_a_read_is_retried_after_refused_connections(served: Served) -> None:
    """A GET whose first two connections are refused succeeds on the third try."""
    setup = served.client(served.key())
    setup.write("pref-1", **fact())
    transport = FlakyTransport(refuse=2)
    client = flaky_client(served, transport, RetryPolicy(attempts=3, backoff=0.5))
    assert client.get("pref-1").id == "pref-1"
    assert len(transport.sent) == 3
    assert len(SLEPT) == 2


def test_a_write_is_retried_with_the_same_idempotency_key(served: Served) -> None:
    """Every try of one write carries the same Idempotency-Key."""
    transport = FlakyTransport(refuse=2)
    client = flaky_client(served, transport, RetryPolicy(attempts=3))
    client.create(**fact())
    keys = {request.headers["Idempotency-Key"] for request in transport.sent}
    assert len(transport.sent) == 3
    assert len(keys) == 1


def test_a_write_whose_answer_was_lost_is_not_written_twice(served: Served) -> None:
    """The service wrote, the answer was lost; the retry returns the first result."""
    transport = FlakyTransport(drop=1)
    client = flaky_client(served, transport, RetryPolicy(attempts=3))
    result = client.create(**fact())
    assert len(transport.sent) == 2
    events = served.client(served.key()).events()
    assert [event.memory_id for event in events] == [result.item.id]


def test_a_promote_whose_answer_was_lost_is_not_applied_twice(served: Served) -> None:
    """A lost promote answer, retried, returns the promoted item; no second event."""
    writer = served.client(served.key("memory:write", trust="untrusted"))
    item = writer.create(**fact(trust="untrusted")).item
    transport = FlakyTransport(drop=1)
    reviewer = flaky_client(served, transport, RetryPolicy(attempts=2))
    promoted = reviewer.promote(item.id, item.version)
    assert promoted.version == 2
    assert len(served.client(served.key()).history(item.id)) == 2


def test_retries_are_bounded(served: Served) -> None:
    """A service that stays unreachable is tried ``attempts`` times, then StoreUnavailable."""
    transport = FlakyTransport(refuse=100)
    client = flaky_client(served, transport, RetryPolicy(attempts=3, backoff=0.1))
    with pytest.raises(StoreUnavailable, match="tried 3 times"):
        client.search("support-bot", "support", "email")
    assert len(transport.sent) == 3
    assert len(SLEPT) == 2


def test_backoff_grows_exponentially_with_jitter(served: Served) -> None:
    """Each wait is random between 0 and backoff·2ⁿ, capped at max_backoff."""
    transport = FlakyTransport(refuse=100)
    policy = RetryPolicy(attempts=6, backoff=0.1, max_backoff=0.5)
    client = flaky_client(served, transport, policy)
    with pytest.raises(StoreUnavailable):
        client.get("pref-1")
    caps = [0.1, 0.2, 0.4, 0.5, 0.5]
    assert len(SLEPT) == len(caps)
    assert all(0 <= slept <= cap for slept, cap in zip(SLEPT, caps, strict=True))


def test_the_delay_is_full_jitter() -> None:
    """Delays spread over the whole window: clients that failed together return apart."""
    policy = RetryPolicy(backoff=1.0, max_backoff=8.0)
    rng = random.Random(7)
    delays = [policy.delay(3, rng) for _ in range(200)]
    assert all(0 <= d <= 4.0 for d in delays)
    assert min(delays) < 0.5 < 3.5 < max(delays)


def test_an_error_answer_is_never_retried(served: Served) -> None:
    """A 404 is the service's answer: one request, no retry."""
    transport = FlakyTransport()
    client = flaky_client(served, transport, RetryPolicy(attempts=5))
    with pytest.raises(Exception, match="not found"):
        client.get("nobody-wrote-this")
    assert len(transport.sent) == 1


def test_a_call_without_an_idempotency_key_is_not_retryable() -> None:
    """Only reads, searches and keyed mutations may be sent again."""
    decode = str
    assert Call("GET", "/v1/events", decode).retryable
    assert Call("POST", "/v1/search", decode, safe=True).retryable
    assert Call("POST", "/v1/memories", decode, idempotency_key="k").retryable
    assert not Call("POST", "/v1/memories", decode).retryable


def test_a_policy_needs_at_least_one_attempt() -> None:
    """RetryPolicy(attempts=0) is refused; attempts=1 turns retries off."""
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=0)
    assert RetryPolicy(attempts=1).attempts == 1


def test_a_refused_connection_without_retries_is_tried_once(served: Served) -> None:
    """With attempts=1 a refused connection fails at once."""
    transport = FlakyTransport(refuse=1)
    client = flaky_client(served, transport, RetryPolicy(attempts=1))
    with pytest.raises(StoreUnavailable, match="tried once"):
        client.live()
    assert len(transport.sent) == 1


def test_an_unsupported_url_is_not_retried() -> None:
    """A transport error that no retry can fix (a bad scheme) fails at once."""
    with (
        Client("ftp://gmem.test", "key") as client,
        pytest.raises(StoreUnavailable, match="UnsupportedProtocol"),
    ):
        client.live()
    assert httpx.UnsupportedProtocol  # the class the message names
