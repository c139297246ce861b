"""Problem answers become the library's own exceptions, chosen by the problem's type."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from governed_memory import (
    AuthenticationError,
    Client,
    Conflict,
    GovernedMemoryError,
    IdempotencyKeyReused,
    InvalidTransition,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    SelfPromotion,
    StoreUnavailable,
    ValidationError,
    VersionConflict,
)
from governed_memory.client import RetryPolicy
from governed_memory.client._problems import BY_TYPE
from governed_memory.store.memory import MemoryStore
from tests.support.api import FAST, MakeServed, Served
from tests.support.fakes import fact

CANARY = "canary-7f3c9e-never-echoed"


def raised(call: object) -> GovernedMemoryError:
    """The exception a zero-argument callable raises (it must raise one of ours)."""
    assert callable(call)
    with pytest.raises(GovernedMemoryError) as caught:
        call()
    return caught.value


def test_a_missing_key_is_an_authentication_error(served: Served) -> None:
    """401 without a key → AuthenticationError."""
    error = raised(lambda: served.client().get("pref-1"))
    assert type(error) is AuthenticationError


def test_an_unknown_key_is_an_authentication_error(served: Served) -> None:
    """401 for a well-formed key nobody created → AuthenticationError."""
    stranger = served.client("gmem_0123456789abcdef_" + "A" * 43)
    assert type(raised(lambda: stranger.search("support-bot", "support", "email"))) is (
        AuthenticationError
    )


def test_a_missing_scope_is_permission_denied(served: Served) -> None:
    """403 for a scope the key lacks → PermissionDenied (not its subclass)."""
    agent = served.client(served.key("memory:write,memory:read", agents="support-bot"))
    assert type(raised(lambda: agent.list_quarantine())) is PermissionDenied


def test_claiming_more_trust_than_the_key_allows_is_permission_denied(served: Served) -> None:
    """403 for a trusted write with an untrusted key → PermissionDenied."""
    agent = served.client(served.key("memory:write", trust="untrusted"))
    assert type(raised(lambda: agent.create(**fact(trust="trusted")))) is PermissionDenied


def test_reviewing_your_own_write_is_self_promotion(served: Served) -> None:
    """403 self-review → SelfPromotion, still a PermissionDenied."""
    both = served.client(served.key("memory:write,memory:review", trust="untrusted"))
    item = both.create(**fact(trust="untrusted")).item
    error = raised(lambda: both.promote(item.id, item.version))
    assert type(error) is SelfPromotion
    assert isinstance(error, PermissionDenied)


def test_an_unknown_id_is_not_found(client: Client) -> None:
    """404 → NotFound."""
    assert type(raised(lambda: client.get("nobody-wrote-this"))) is NotFound


def test_a_stale_version_is_a_version_conflict_with_the_current_version(client: Client) -> None:
    """409 version conflict → VersionConflict carrying id, expected and current version."""
    client.write("pref-1", **fact())
    client.write("pref-1", **fact(), expected_version=1)
    error = raised(lambda: client.write("pref-1", **fact(), expected_version=1))
    assert type(error) is VersionConflict
    assert isinstance(error, VersionConflict)
    assert (error.memory_id, error.expected_version, error.current_version) == ("pref-1", 1, 2)
    assert "version 2" in error.detail


def test_promoting_a_stale_version_is_a_version_conflict(served: Served) -> None:
    """A promote at an old version → VersionConflict with the current version."""
    writer = served.client(served.key("memory:write", trust="untrusted"))
    reviewer = served.client(served.key("memory:review"))
    item = writer.create(**fact(trust="untrusted")).item
    writer.write(item.id, **fact(trust="untrusted"), expected_version=1)
    error = raised(lambda: reviewer.promote(item.id, 1))
    assert isinstance(error, VersionConflict)
    assert error.current_version == 2


def test_promoting_an_active_item_is_an_invalid_transition(served: Served) -> None:
    """409 not quarantined → InvalidTransition."""
    writer = served.client(served.key("memory:write"))
    reviewer = served.client(served.key("memory:review"))
    item = writer.create(**fact(trust="trusted")).item
    error = raised(lambda: reviewer.promote(item.id, item.version))
    assert type(error) is InvalidTransition
    assert isinstance(error, Conflict)


def test_an_idempotency_key_reused_for_another_request_is_refused(client: Client) -> None:
    """409 idempotency key reuse with a different body → IdempotencyKeyReused."""
    client.create(**fact(), idempotency_key="order-1")
    error = raised(lambda: client.create(**fact(content="Other."), idempotency_key="order-1"))
    assert type(error) is IdempotencyKeyReused


def test_a_body_over_the_limit_is_payload_too_large(make_served: MakeServed) -> None:
    """413 → PayloadTooLarge, before the service reads the body."""
    served = make_served(max_body_bytes=1024)
    client = served.client(served.key())
    assert type(raised(lambda: client.create(**fact(content="x" * 2000)))) is PayloadTooLarge


def test_invalid_fields_are_a_validation_error_listing_each_field(client: Client) -> None:
    """422 → ValidationError whose errors name every bad field."""
    error = raised(lambda: client.create(**fact(purpose="Not A Purpose", confidence=2.0)))
    assert type(error) is ValidationError
    assert isinstance(error, ValidationError)
    assert {e.field for e in error.errors} == {"purpose", "confidence"}


def test_errors_never_carry_memory_content(client: Client) -> None:
    """Content over the length limit is refused without being quoted anywhere."""
    error = raised(lambda: client.create(**fact(content=CANARY * 400)))
    assert isinstance(error, ValidationError)
    assert CANARY not in str(error)
    assert CANARY not in error.detail
    assert all(CANARY not in e.message for e in error.errors)


def test_too_many_requests_is_rate_limited_with_retry_after(make_served: MakeServed) -> None:
    """429 → RateLimited with retry_after in seconds, and it is not retried."""
    served = make_served(rate_limit_requests=2, rate_limit_window_seconds=60)
    client = served.client(served.key())
    client.events()
    client.events()
    error = raised(lambda: client.events())
    assert type(error) is RateLimited
    assert isinstance(error, RateLimited)
    assert 1 <= error.retry_after <= 60


class DownStore(MemoryStore):
    """A store that cannot be reached (it still knows the API keys)."""

    def ping(self) -> None:
        raise StoreUnavailable("the store is not answering")

    def get(self, tenant_id: str, memory_id: str) -> None:
        raise StoreUnavailable("the store is not answering")


def test_an_unreachable_store_is_store_unavailable(make_served: MakeServed) -> None:
    """503 → StoreUnavailable for calls; ready() and health() say False."""
    served = make_served(store=DownStore())
    client = served.client(served.key())
    assert type(raised(lambda: client.get("pref-1"))) is StoreUnavailable
    assert client.live()
    assert not client.ready()
    assert not client.health()


class BrokenStore(MemoryStore):
    """A store with a bug: reading an item crashes."""

    def get(self, tenant_id: str, memory_id: str) -> None:
        raise RuntimeError("a bug")


def test_an_internal_error_is_the_base_error(make_served: MakeServed) -> None:
    """500 → GovernedMemoryError itself, saying nothing of the bug."""
    served = make_served(store=BrokenStore())
    client = served.client(served.key())
    error = raised(lambda: client.get("pref-1"))
    assert type(error) is GovernedMemoryError
    assert "a bug" not in str(error)


def answering(status: int, **response: Any) -> Client:
    """A client of a fake service that gives every request the same answer."""
    transport = httpx.MockTransport(lambda request: httpx.Response(status, **response))
    return Client("http://gmem.test", "key", transport=transport, retry=FAST)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, ValidationError),
        (401, AuthenticationError),
        (403, PermissionDenied),
        (404, NotFound),
        (409, Conflict),
        (413, PayloadTooLarge),
        (422, ValidationError),
        (429, RateLimited),
        (502, StoreUnavailable),
        (503, StoreUnavailable),
        (418, GovernedMemoryError),
    ],
)
def test_an_answer_that_is_not_a_problem_maps_by_status(
    status: int, expected: type[GovernedMemoryError]
) -> None:
    """A proxy's HTML page (no problem type) still raises the class of its status."""
    with answering(status, text="<html>bad gateway</html>") as client:
        assert type(raised(lambda: client.get("pref-1"))) is expected


def test_the_problem_type_wins_over_the_status() -> None:
    """The type decides the class: a 403 typed self-review is SelfPromotion."""
    problem = {"type": "urn:gmem:problem:self-review", "title": "t", "status": 403, "detail": "d"}
    with answering(403, json=problem) as client:
        error = raised(lambda: client.promote("pref-1", 1))
    assert type(error) is SelfPromotion
    assert error.detail == "d"


def test_every_problem_type_of_the_service_has_a_class() -> None:
    """Each type in the service's problem table is mapped by the client."""
    from governed_memory.http.problems import PROBLEMS

    slugs = {cls.slug for cls in PROBLEMS}
    # 405 means the client itself sent a wrong method: a bug, left to the base class.
    assert slugs - {"method-not-allowed"} <= set(BY_TYPE)


def test_an_answer_that_is_not_ours_is_an_error_not_a_crash() -> None:
    """A 200 whose body is not an item raises GovernedMemoryError, not KeyError."""
    with answering(200, json={"hello": "world"}) as client:
        assert type(raised(lambda: client.get("pref-1"))) is GovernedMemoryError


def test_a_service_that_never_answers_is_store_unavailable() -> None:
    """Connection refused on every try → StoreUnavailable naming the URL, not the request."""
    with Client(
        "http://127.0.0.1:9", "key", retry=RetryPolicy(attempts=2, backoff=0.001)
    ) as client:
        error = raised(lambda: client.create(**fact(content=CANARY)))
    assert type(error) is StoreUnavailable
    assert "127.0.0.1:9" in error.detail
    assert CANARY not in str(error)
