"""Concurrency under load: 32 racers per round, one winner per round (SPEC §4, §12).

Twenty rounds of 32 threads rewrite one item at one expected version: exactly one wins and
31 get a version conflict naming the current version. The same on SQLite in one process,
over HTTP against one server, and across two ``gmem serve`` instances sharing one
PostgreSQL database. Then 32 concurrent retries of one idempotency key (a write, a
promotion, a forget): one event, and 32 byte-identical answers.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from governed_memory.crypto import Keyring
from governed_memory.errors import VersionConflict
from governed_memory.service import MemoryService
from governed_memory.store.sqlite import SQLiteStore
from tests.support.api import ALL_MEMORY_SCOPES, MakeApi
from tests.support.fakes import FakeClock, body, principal, write_body
from tests.support.postgres import Deployment

RACERS = 32
ROUNDS = 20
T = TypeVar("T")


def race(workers: Sequence[Callable[[], T]]) -> list[T | Exception]:
    """Run every worker at the same moment (a barrier); results or exceptions, in order."""
    barrier = threading.Barrier(len(workers))

    def run(work: Callable[[], T]) -> T | Exception:
        barrier.wait()
        try:
            return work()
        except Exception as error:  # noqa: BLE001 - collected for the assertions
            return error

    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        return list(pool.map(run, workers))


def test_sqlite_in_process_twenty_rounds_of_32_writers_one_winner_each(tmp_path: Path) -> None:
    """The group commit never lets two writers of one version both commit."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3")
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
    writer = principal()
    try:
        for n in range(ROUNDS):
            memory_id = f"race-{n}"
            service.write(writer, body(id=memory_id))
            results = race(
                [
                    lambda i=i, memory_id=memory_id: service.write(
                        writer, body(id=memory_id, content=f"Racer {i}.", expected_version=1)
                    )
                    for i in range(RACERS)
                ]
            )
            winners = [r for r in results if not isinstance(r, Exception)]
            conflicts = [r for r in results if isinstance(r, VersionConflict)]
            assert len(winners) == 1, results
            assert len(conflicts) == RACERS - 1
            assert {c.current_version for c in conflicts} == {2}
            final = service.get(writer, memory_id)
            assert (final.version, final.content) == (2, winners[0].item.content)
        assert service.verify_replay().ok
        assert store.head() == ROUNDS * 2
    finally:
        store.close()


def http_rounds(clients: Sequence[httpx.Client], headers: dict[str, str], tag: str) -> None:
    """ROUNDS rounds of one rewrite per client at version 1 of a fresh item."""
    for n in range(ROUNDS):
        path = f"/v1/memories/{tag}-{n}"
        created = clients[0].put(path, json=write_body(), headers=headers)
        assert created.status_code == 201, created.text
        responses = race(
            [
                lambda c=c, i=i, path=path, n=n: c.put(
                    path,
                    json=write_body(content=f"Racer {i} of round {n}.", expected_version=1),
                    headers=headers,
                )
                for i, c in enumerate(clients)
            ]
        )
        assert all(isinstance(r, httpx.Response) for r in responses), responses
        done = [r for r in responses if isinstance(r, httpx.Response)]
        statuses = sorted(r.status_code for r in done)
        assert statuses == [200] + [409] * (len(clients) - 1), (n, statuses)
        conflicts = [r.json() for r in done if r.status_code == 409]
        assert {p["type"] for p in conflicts} == {"urn:gmem:problem:version-conflict"}
        assert {p["current_version"] for p in conflicts} == {2}
        (winner,) = [r.json() for r in done if r.status_code == 200]
        for client in {id(c): c for c in clients[:2]}.values():
            final = client.get(path, headers=headers).json()
            assert (final["version"], final["content"]) == (2, winner["content"])


def idempotent_bursts(
    clients: Sequence[httpx.Client], admin: dict[str, str], reviewer: dict[str, str]
) -> None:
    """32 concurrent retries of one key for a write, then its promotion, then a forget."""
    before = _events_after(clients[0], admin, 0)
    start = before[-1]["position"] if before else 0
    subject = "burst-" + secrets.token_hex(3)
    write = write_body(subject_id=subject, trust="untrusted", content="One write, many retries.")
    write.pop("expected_version")
    item = _burst(clients, "POST", "/v1/memories", write, admin)
    assert item["status"] == "quarantined"
    promote = f"/v1/memories/{item['id']}/promote"
    assert _burst(clients, "POST", promote, {"expected_version": 1}, reviewer)["status"] == "active"
    forget = f"/v1/subjects/{subject}/forget"
    assert _burst(clients, "POST", forget, {}, admin)["affected"] == 1
    types = [e["type"] for e in _events_after(clients[0], admin, start)]
    assert types == ["memory.written", "memory.promoted", "subject.forgotten"]


def _burst(
    clients: Sequence[httpx.Client],
    method: str,
    path: str,
    payload: dict[str, Any],
    headers: dict[str, str],
) -> Any:
    """Every client sends the same request with the same fresh key at once."""
    keyed = headers | {"Idempotency-Key": "burst-" + secrets.token_hex(6)}
    responses = race(
        [lambda c=c: c.request(method, path, json=payload, headers=keyed) for c in clients]
    )
    done = [r for r in responses if isinstance(r, httpx.Response)]
    assert len(done) == len(clients), responses
    assert {r.status_code for r in done} <= {200, 201}, {r.text for r in done}
    assert len({r.text for r in done}) == 1  # byte-identical answers
    return done[0].json()


def _events_after(
    client: httpx.Client, headers: dict[str, str], after: int
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        page = client.get("/v1/events", params={"after": after, "limit": 1000}, headers=headers)
        events = page.json()["events"]
        if not events:
            return found
        found += events
        after = events[-1]["position"]


@pytest.fixture
def clients(
    request: pytest.FixtureRequest,
) -> Iterator[Callable[[Sequence[str]], list[httpx.Client]]]:
    """Open RACERS clients spread over the given base URLs; close them after the test."""
    opened: list[httpx.Client] = []

    def make(urls: Sequence[str]) -> list[httpx.Client]:
        made = [httpx.Client(base_url=urls[i % len(urls)], timeout=60) for i in range(RACERS)]
        opened.extend(made)
        return made

    yield make
    for client in opened:
        client.close()


def test_http_twenty_rounds_of_32_writers_one_winner_each(make_api: MakeApi, clients: Any) -> None:
    """Over HTTP against one server on SQLite: one 200 and 31 409s per round."""
    api = make_api(rate_limit_requests=10**9)
    admin = api.key(ALL_MEMORY_SCOPES)
    http_rounds(clients([str(api.client.base_url)]), admin, "http")
    assert api.service.verify_replay().ok


def test_http_32_retries_of_one_key_make_one_event_and_one_answer(
    make_api: MakeApi, clients: Any
) -> None:
    """A write, its promotion and a forget, each retried 32 times at once by key."""
    api = make_api(rate_limit_requests=10**9)
    admin = api.key(ALL_MEMORY_SCOPES)
    reviewer = api.key("memory:review", trust="untrusted")
    idempotent_bursts(clients([str(api.client.base_url)]), admin, reviewer)


def _pg_key(deployment: Deployment, scopes: str, trust: str) -> dict[str, str]:
    created = json.loads(
        deployment.gmem(
            *("keys", "create", "--tenant", "acme", "--agents", "*"),
            *("--principal", f"racer-{scopes.count(',')}-{trust}"),
            *("--scopes", scopes, "--max-trust", trust, "--json"),
        )
    )
    return {"Authorization": f"Bearer {created['api_key']}"}


def test_postgres_two_instances_twenty_rounds_of_32_writers_one_winner_each(
    pg_pair: tuple[Deployment, list[httpx.Client]], clients: Any
) -> None:
    """Half the racers on each of two servers sharing one database: still one winner."""
    deployment, servers = pg_pair
    admin = _pg_key(deployment, ALL_MEMORY_SCOPES, "trusted")
    http_rounds(clients([str(server.base_url) for server in servers]), admin, "pg")


def test_postgres_two_instances_32_retries_of_one_key_make_one_event(
    pg_pair: tuple[Deployment, list[httpx.Client]], clients: Any
) -> None:
    """Retries of one key spread over both servers: one event, identical answers."""
    deployment, servers = pg_pair
    admin = _pg_key(deployment, ALL_MEMORY_SCOPES, "trusted")
    reviewer = _pg_key(deployment, "memory:review", "untrusted")
    idempotent_bursts(clients([str(server.base_url) for server in servers]), admin, reviewer)


class LateIdempotencyStore(SQLiteStore):
    """A store whose first idempotency lookup misses, then lets a twin request commit.

    It replays, deterministically, the interleaving two concurrent retries of one key can
    take: B looks for the key's record (none yet), A commits, B reads the item A changed.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path, synchronous="NORMAL")
        self.twin: Callable[[], object] | None = None

    def idempotency(self, tenant_id: str, credential: str, key: str) -> Any:
        found = super().idempotency(tenant_id, credential, key)
        twin, self.twin = self.twin, None
        if twin is not None:
            twin()  # the twin commits right after this retry found nothing
        return found


@pytest.mark.parametrize("action", ["rewrite", "promote", "reject", "forget"])
def test_a_retry_that_loses_the_race_to_its_twin_returns_the_first_result(
    tmp_path: Path, action: str
) -> None:
    """A retry overtaken by the first attempt (same key) answers like it, not with a 409."""
    store = LateIdempotencyStore(tmp_path / "gmem.sqlite3")
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
    writer, reviewer = principal(), principal(name="reviewer")
    service.write(writer, body(id="m1", trust="untrusted"))
    calls: dict[str, Callable[[], Any]] = {
        "rewrite": lambda: service.write(
            writer, body(id="m1", content="Rewritten.", expected_version=1), idempotency_key="k"
        ),
        "promote": lambda: service.promote(reviewer, "m1", 1, idempotency_key="k"),
        "reject": lambda: service.reject(reviewer, "m1", 1, "No.", idempotency_key="k"),
        "forget": lambda: service.forget_subject(writer, "customer-1", idempotency_key="k"),
    }
    call = calls[action]
    first: list[Any] = []
    store.twin = lambda: first.append(call())
    try:
        second = call()
        assert first and second == first[0]
        assert store.head() == 2  # the item's write, then one event for the keyed action
        assert service.verify_replay().ok
    finally:
        store.close()
