"""Where a search is made (routes.py, ``MemoryService.search(wait=False)``). In a single
process and in a worker of ``gmem serve --workers N`` alike: a short one on the event loop,
which saves the hop to a worker thread and back; a long one, or one that would wait, from a
worker thread, so the loop keeps answering every other request. The answer is the same
either way: same filters, ranking, budget, metrics."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from governed_memory.apikeys import split_token, verify
from governed_memory.core.model import Principal
from governed_memory.core.values import Trust
from governed_memory.http.app import create_app
from governed_memory.http.server import running
from governed_memory.http.shared import SharedState
from governed_memory.ports import Store
from governed_memory.records import SearchMatches, SearchRequest
from governed_memory.store.sqlite import SQLiteStore
from governed_memory.store.sqlite import search as sqlite_search
from tests.conftest import make_store
from tests.support.api import ALL_MEMORY_SCOPES, Api, MakeApi, add_key, settings_for
from tests.support.fakes import body
from tests.support.fakes import principal as writer
from tests.support.fakes import query as search_body

#: Sixteen distinct terms: a search of them reads at most 16 postings per item of its scope.
SIXTEEN = (
    "email phone letter invoice refund parcel courier warranty "
    "ticket billing address passport voucher receipt account pharmacy"
)


def on_event_loop() -> bool:
    """Whether this thread is running an event loop (a worker thread is not)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Searches:
    """Wraps a store's ``search``: for each search made to its end, whether it ran on the
    event loop; ``hold``: a search of a scope of more items than that waits, once its
    answer is made, until :meth:`release` (a long search, as long as the test wants)."""

    def __init__(self, store: Store, hold: int | None = None) -> None:
        self.on_loop: list[bool] = []
        self.holding = threading.Event()
        self._released = threading.Event()
        self._hold = hold
        search = store.search

        def recorded(request: SearchRequest) -> SearchMatches:
            matches = search(request)  # may refuse (ReadWouldWait): then not recorded
            self.on_loop.append(on_event_loop())
            if self._hold is not None and matches.statistics.documents > self._hold:
                self.holding.set()
                self._released.wait(10)
            return matches

        store.search = recorded  # type: ignore[method-assign]

    def release(self) -> None:
        self._released.set()


@pytest.fixture
def api(make_api: MakeApi) -> Api:
    """The app over a fresh SQLite store, searching as every process does."""
    return as_worker(make_api())


def as_worker(api: Api) -> Api:
    """``api`` searching as one worker of ``gmem serve --workers N`` (create_app's rule)."""
    api.app.state.searches_on_loop = api.service.searches_at_once
    return api


def key(api: Api) -> tuple[dict[str, str], Principal]:
    """Headers of a new key of tenant acme with every memory scope, and its principal."""
    record, token = add_key(api.store, "acme", ALL_MEMORY_SCOPES, now=api.clock.now())
    principal = verify(record, split_token(token)[1], api.clock.now())
    return {"Authorization": f"Bearer {token}"}, principal


def fill(api: Api, count: int, agent: str = "support-bot") -> None:
    """``count`` items in the agent's support scope, written through the service."""
    for i in range(count):
        content = f"Item {i} mentions email and a refund." if i % 2 else f"Item {i}: a parcel."
        api.service.write(writer(), body(agent_id=agent, content=content, subject_id="s-fill"))


def test_a_short_search_is_made_on_the_event_loop_and_a_long_one_from_a_worker_thread(
    api: Api,
) -> None:
    """The bound is known before the search starts: the scope's items times the query's
    distinct terms (the postings it can read at most), at most ``PROMPT_POSTINGS`` on the
    loop. 250 items and 16 terms is 4,000: on the loop; one item more, from a worker."""
    assert sqlite_search.PROMPT_POSTINGS == 4_000
    headers, _ = key(api)
    fill(api, 250)
    searches = Searches(api.store)
    short = api.client.post("/v1/search", json=search_body("email refund"), headers=headers)
    at_bound = api.client.post("/v1/search", json=search_body(SIXTEEN), headers=headers)
    assert short.status_code == at_bound.status_code == 200
    assert searches.on_loop == [True, True]
    fill(api, 1)
    above = api.client.post("/v1/search", json=search_body(SIXTEEN), headers=headers)
    fewer_terms = api.client.post("/v1/search", json=search_body("email refund"), headers=headers)
    assert above.status_code == fewer_terms.status_code == 200
    assert searches.on_loop == [True, True, False, True]
    assert len(above.json()["items"]) == 10


def test_a_long_search_leaves_the_event_loop_answering(api: Api) -> None:
    """While a search of a scope above the bound runs, /health/live (and a short search
    of another scope) are answered: the long one is not holding the event loop."""
    headers, _ = key(api)
    fill(api, 251)
    fill(api, 3, agent="billing-bot")
    searches = Searches(api.store, hold=250)
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(
            api.client.post, "/v1/search", json=search_body(SIXTEEN), headers=headers
        )
        try:
            assert searches.holding.wait(10)
            live = api.client.get("/health/live", timeout=3)
            other = search_body("email", agent_id="billing-bot")
            short = api.client.post("/v1/search", json=other, headers=headers, timeout=3)
        finally:
            searches.release()
        long = pending.result(timeout=30)
    assert live.status_code == 200
    assert short.status_code == 200 and len(short.json()["items"]) == 1
    assert long.status_code == 200 and len(long.json()["items"]) == 10
    assert searches.on_loop == [False, True]  # the long one (recorded before it waits), the short


def test_a_search_the_database_cannot_answer_at_once_is_made_from_a_worker_thread(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop's reads never wait: a busy database refuses them at once, and the search
    is made again from a worker thread, which may wait (here: the same answer)."""
    headers, _ = key(api)
    fill(api, 4)
    searches = Searches(api.store)
    expected = api.client.post("/v1/search", json=search_body("refund"), headers=headers)
    assert isinstance(api.store, SQLiteStore)

    class BusyReader:
        """The reader that must not wait, as it behaves while another process holds the
        file (recovering it, or in exclusive mode)."""

        in_transaction = False

        def execute(self, sql: str, params: object = ()) -> Any:
            import sqlite3

            busy = sqlite3.OperationalError("database is locked")
            busy.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
            raise busy

    monkeypatch.setattr(api.store.database, "prompt_reader", BusyReader)
    answered = api.client.post("/v1/search", json=search_body("refund"), headers=headers)
    assert answered.status_code == 200
    assert answered.json() == expected.json()
    assert searches.on_loop == [True, False]


# -- the same answer either way, on every backend ---------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def backend_api(request: pytest.FixtureRequest, make_api: MakeApi, tmp_path: Path) -> Iterator[Api]:
    """The app over a fresh store of each SQL backend."""
    for store in make_store(request.param, tmp_path / "store"):
        yield as_worker(make_api(store=store))


def varied(api: Api) -> None:
    """Items the hard filters must tell apart: two subjects, two kinds, another agent, a
    quarantined write, an expired item, a deleted one."""
    service = api.service

    def write(memory_id: str, **overrides: Any) -> None:
        service.write(writer(), body(id=memory_id, **overrides))

    write("m-fact", content="Prefers email for refund questions.")
    write("m-pref", kind="preference", content="Email, never phone, about a refund.")
    write("m-other", subject_id="customer-2", content="Email about a refund and a parcel.")
    write("m-agent", agent_id="billing-bot", content="Email the refund form.")
    write("m-expired", content="A refund by email, soon stale.", ttl_seconds=60)
    write("m-deleted", content="A refund email to be deleted.")
    service.write(
        writer(trust=Trust.UNTRUSTED),
        body(id="m-quarantined", content="Refund by email, untrusted.", trust="untrusted"),
    )
    service.erase(writer(name="eraser"), "m-deleted")
    api.clock.advance(seconds=120)


QUERIES: list[dict[str, Any]] = [
    search_body("email refund"),
    search_body("email refund", subject_id="customer-1"),
    search_body("refund", kinds=["preference"]),
    search_body("refund email parcel phone", limit=2),
    search_body("email refund", token_budget=12),
    search_body("nothing matches this"),
]
EXPECTED_IDS = [
    ["m-fact", "m-pref", "m-other"],
    ["m-fact", "m-pref"],
    ["m-pref"],
    2,
    None,
    [],
]


def test_a_search_answers_as_the_service_does_wherever_it_is_made(
    backend_api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each search's JSON is the service's own answer (filters, ranking, budget, scores),
    whether made on the event loop (SQLite, small scope), from a worker thread because its
    scope is over the bound (SQLite, the bound lowered to 0), or always from a worker
    thread (PostgreSQL, whose reads are round trips); and each is counted once in the
    metrics. A search commits no event, on either path."""
    api = backend_api
    headers, principal = key(api)
    varied(api)
    events = api.client.get("/v1/events", headers=headers).json()["events"]
    searches = Searches(api.store)
    sqlite = isinstance(api.store, SQLiteStore)

    def answers() -> list[dict[str, Any]]:
        return [api.client.post("/v1/search", json=q, headers=headers).json() for q in QUERIES]

    on_loop = answers()
    monkeypatch.setattr(sqlite_search, "PROMPT_POSTINGS", 0)
    pooled = answers()
    expected = [api.service.search(principal, q).to_dict() for q in QUERIES]
    assert searches.on_loop == [sqlite] * len(QUERIES) + [False] * 2 * len(QUERIES)
    assert on_loop == pooled == normalised(expected)
    for answer, ids in zip(on_loop, EXPECTED_IDS, strict=True):
        found = [item["id"] for item in answer["items"]]
        if isinstance(ids, list):
            assert sorted(found) == sorted(ids)
        elif isinstance(ids, int):
            assert len(found) == ids
    assert on_loop[4]["skipped"] > 0  # the budget left some out
    assert api.client.get("/v1/events", headers=headers).json()["events"] == events
    metrics = api.client.get("/metrics").text
    assert f"gmem_search_duration_seconds_count {2.0 * len(QUERIES)}" in metrics


def normalised(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The results as the JSON the API sends (datetimes and floats as it writes them)."""
    return [httpx.Response(200, json=r).json() for r in results]


def test_one_process_and_a_worker_of_several_both_make_a_short_search_on_their_loop(
    make_api: MakeApi, tmp_path: Path
) -> None:
    """Alone, or as one worker of ``gmem serve --workers N`` (``create_app(shared=...)``),
    the process makes a short search on its loop."""
    alone = make_api()
    headers, _ = key(alone)
    fill(alone, 2)
    searches = Searches(alone.store)
    assert alone.app.state.searches_on_loop is True
    assert alone.client.post("/v1/search", json=search_body("refund"), headers=headers).json()
    assert searches.on_loop == [True]

    shared = tmp_path / "shared"
    shared.mkdir()
    SharedState.prepare(shared)
    app = create_app(
        settings_for(tmp_path / "worker", metrics_enabled=False),
        service=alone.service,
        api_keys=alone.store,
        shared=shared,
    )
    assert app.state.searches_on_loop is True
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as worker:
        found = worker.post("/v1/search", json=search_body("refund"), headers=headers)
    assert found.status_code == 200 and len(found.json()["items"]) == 1
    assert searches.on_loop == [True, True]
