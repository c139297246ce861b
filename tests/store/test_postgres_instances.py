"""Two real ``gmem serve`` processes on one PostgreSQL database (SPEC §10, §12).

Each test starts two servers whose ``GMEM_DATABASE_URL`` points at one fresh schema (through
the connection's ``search_path``) and whose master key is the same, as a deployment behind
a load balancer would run them.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import postgres_dsn
from tests.support.fakes import write_body
from tests.support.postgres import Deployment, fresh_schema


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    """A fresh schema on the test server, reached through the URL's search_path."""
    dsn = postgres_dsn()
    assert dsn is not None
    with fresh_schema(dsn) as url:
        yield Deployment(tmp_path, url)


@pytest.fixture
def two(deployment: Deployment) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """Two instances started at the same time (they race to migrate the empty schema)."""
    with ExitStack() as stack:
        first, second = deployment.pair(stack)
        yield first, second


def events(client: httpx.Client, headers: dict[str, str]) -> list[dict[str, Any]]:
    """The whole audit feed of the tenant."""
    found: list[dict[str, Any]] = []
    after = 0
    while True:
        page = client.get("/v1/events", params={"after": after, "limit": 100}, headers=headers)
        assert page.status_code == 200, page.text
        batch = page.json()["events"]
        if not batch:
            return found
        found += batch
        after = batch[-1]["position"]


def test_sixteen_writers_on_two_instances_one_expected_version_one_winner(
    deployment: Deployment, two: tuple[httpx.Client, httpx.Client]
) -> None:
    """Split across two servers, 16 rewrites of version 1: one 200, fifteen 409s."""
    headers = deployment.key()
    first = two[0].put("/v1/memories/m1", json=write_body(), headers=headers)
    assert first.status_code == 201, first.text
    barrier = threading.Barrier(16)
    responses: list[httpx.Response] = []

    def rewrite(n: int) -> None:
        body = write_body(content=f"Writer {n} says so.", expected_version=1)
        barrier.wait()
        responses.append(two[n % 2].put("/v1/memories/m1", json=body, headers=headers))

    threads = [threading.Thread(target=rewrite, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [409] * 15
    assert {r.json()["current_version"] for r in responses if r.status_code == 409} == {2}
    for client in two:
        assert client.get("/v1/memories/m1", headers=headers).json()["version"] == 2
    assert [e["version"] for e in events(two[1], headers)] == [1, 2]


def test_an_idempotent_retry_on_the_other_instance_returns_the_first_result(
    deployment: Deployment, two: tuple[httpx.Client, httpx.Client]
) -> None:
    """The idempotency record is in the database: instance b replays what a answered."""
    headers = deployment.key() | {"Idempotency-Key": "retry-" + uuid.uuid4().hex}
    body = write_body()
    body.pop("expected_version")
    first = two[0].post("/v1/memories", json=body, headers=headers)
    retry = two[1].post("/v1/memories", json=body, headers=headers)

    assert first.status_code == 201, first.text
    assert (retry.status_code, retry.json()) == (first.status_code, first.json())
    assert len(events(two[0], headers)) == 1


def test_both_expiry_workers_record_one_expiry_per_item(
    deployment: Deployment, two: tuple[httpx.Client, httpx.Client]
) -> None:
    """Both servers sweep every half second; each item still gets exactly one expired event."""
    headers = deployment.key()
    ids = [f"short-{n}" for n in range(12)]
    for n, memory_id in enumerate(ids):
        put = two[n % 2].put(
            f"/v1/memories/{memory_id}", json=write_body(ttl_seconds=1), headers=headers
        )
        assert put.status_code == 201, put.text

    deadline = time.monotonic() + 30
    while True:
        expired = [e for e in events(two[0], headers) if e["type"] == "memory.expired"]
        if len(expired) >= len(ids) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    time.sleep(1.5)  # a few more sweeps by both workers must add nothing

    expired = [e for e in events(two[1], headers) if e["type"] == "memory.expired"]
    assert sorted(e["memory_id"] for e in expired) == sorted(ids)
    for memory_id in ids:
        item = two[1].get(f"/v1/memories/{memory_id}", headers=headers).json()
        assert item["status"] == "expired"
