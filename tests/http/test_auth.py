"""API keys at the HTTP edge: expiry, and a last use recorded without a write per request."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

import pytest

from governed_memory.apikeys import create_api_key
from governed_memory.core.values import Scope, Trust
from governed_memory.errors import StoreUnavailable
from governed_memory.http.auth import LastUsed
from governed_memory.store.memory import MemoryStore
from tests.support.api import Api


def test_an_expired_key_is_401_with_its_own_detail(api: Api) -> None:
    """A key works until its expiry; from then on it is 401 saying when it expired."""
    now = api.clock.now()
    record, token = create_api_key(
        "acme",
        None,
        frozenset({Scope.MEMORY_READ}),
        Trust.UNTRUSTED,
        now,
        principal="ci-bot",
        expires_at=now + timedelta(hours=1),
    )
    api.store.add_api_key(record)
    headers = {"Authorization": f"Bearer {token}"}
    assert api.client.get("/v1/memories/nothing", headers=headers).status_code == 404
    api.clock.advance(hours=1)
    refused = api.client.get("/v1/memories/nothing", headers=headers)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert refused.json()["detail"] == "the API key expired at 2026-12-02T10:00:00.000000Z"


def test_a_request_records_the_keys_last_use_in_the_background(api: Api) -> None:
    """After a request, the key's last use is the time of that request (written by a
    worker thread after the answer, so the test waits for it)."""
    headers = api.key("memory:read")
    key_id = headers["Authorization"].split("_")[1]
    assert api.client.get("/v1/memories/nothing", headers=headers).status_code == 404
    deadline = time.monotonic() + 10
    while (found := api.store.api_key(key_id)) is not None and found.last_used_at is None:
        assert time.monotonic() < deadline, "the last use was never written"
        time.sleep(0.01)
    assert found is not None and found.last_used_at == api.clock.now()


class CountingKeys(MemoryStore):
    """A store that counts the last-use writes it is asked for, and can fail them."""

    def __init__(self) -> None:
        super().__init__()
        self.touches: list[str] = []
        self.failing = False

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        if self.failing:
            raise StoreUnavailable("the store is down")
        self.touches.append(key_id)
        super().touch_api_key(key_id, at)


def test_a_keys_use_is_written_at_most_once_per_interval() -> None:
    """Within the interval a key's uses write nothing more; each key has its own interval."""
    now = [100.0]
    last_used = LastUsed(CountingKeys(), interval=60, monotonic=lambda: now[0])
    assert [last_used.due("a"), last_used.due("a"), last_used.due("b")] == [True, False, True]
    now[0] += 59.9
    assert last_used.due("a") is False
    now[0] += 0.1
    assert last_used.due("a") is True


def test_a_failed_last_use_write_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    """The request already has its answer: a store that fails the write costs a warning."""
    store = CountingKeys()
    store.failing = True
    with caplog.at_level(logging.WARNING, logger="governed_memory.http"):
        LastUsed(store).write("0123456789abcdef", datetime.now().astimezone())
    (warning,) = caplog.records
    assert warning.getMessage() == "could not record an API key's last use (StoreUnavailable)"
