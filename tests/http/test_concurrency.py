"""Concurrent HTTP clients: one winner per expected version, one event per idempotency key."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from governed_memory.store.memory import MemoryStore
from tests.support.api import Api, MakeApi
from tests.support.fakes import query as search_body
from tests.support.fakes import write_body
from tests.support.threads import held_elsewhere


def race(api: Api, count: int, request: Any) -> list[httpx.Response]:
    """Run ``request(client)`` from ``count`` threads released at the same moment."""
    barrier = threading.Barrier(count)
    base_url = str(api.client.base_url)

    def one(_: int) -> httpx.Response:
        with httpx.Client(base_url=base_url, timeout=60) as client:
            barrier.wait()
            response: httpx.Response = request(client)
            return response

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


def test_sixteen_writers_with_one_expected_version_have_one_winner(
    api: Api, admin: dict[str, str]
) -> None:
    """16 concurrent rewrites at version 1: exactly one 200, fifteen 409 with current_version."""
    api.write(admin, "shared")

    def rewrite(client: httpx.Client) -> httpx.Response:
        body = write_body(content="A concurrent rewrite.", expected_version=1)
        return client.put("/v1/memories/shared", json=body, headers=admin)

    responses = race(api, 16, rewrite)
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [409] * 15
    conflicts = [r.json() for r in responses if r.status_code == 409]
    assert {problem["current_version"] for problem in conflicts} == {2}
    final = api.client.get("/v1/memories/shared", headers=admin).json()
    assert final["version"] == 2


def test_twelve_retries_of_one_idempotency_key_make_one_event(
    api: Api, admin: dict[str, str]
) -> None:
    """12 concurrent POSTs with one Idempotency-Key: one event, twelve identical answers."""
    headers = admin | {"Idempotency-Key": "one-request"}

    def create(client: httpx.Client) -> httpx.Response:
        return client.post("/v1/memories", json=write_body(), headers=headers)

    responses = race(api, 12, create)
    assert {r.status_code for r in responses} == {201}
    assert len({r.text for r in responses}) == 1
    events = api.client.get("/v1/events", headers=admin).json()["events"]
    assert [e["type"] for e in events] == ["memory.written"]


def test_a_key_lookup_that_would_wait_leaves_the_event_loop_serving(
    make_api: MakeApi,
) -> None:
    """While a writer holds the store, the API-key lookup is not made on the event loop
    (it would block every connection): it moves to a worker thread, the loop keeps
    answering, and the request completes once the store is free."""
    store = MemoryStore()
    api = make_api(store=store)
    headers = api.key()
    with held_elsewhere(store._lock) as writer, ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(api.client.post, "/v1/search", json=search_body(), headers=headers)
        live = api.client.get("/health/live", timeout=2)
        assert live.status_code == 200  # the loop was not stuck on the lookup
        assert not pending.done()  # the search is waiting in a worker thread
        writer.release()
        assert pending.result(timeout=10).status_code == 200
