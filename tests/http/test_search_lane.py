"""``POST /v1/search`` answered by the search lane (http/search_lane.py) is the same answer,
byte for byte, as through the framework's dispatch: the same status, headers and body for
an ordinary search and for every refusal, each request counted once against its key's rate
limit, named ``/v1/search`` in the access log and the metrics. An ordinary search is
answered by the lane; anything unusual goes the framework's way as before."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from governed_memory.apikeys import split_token
from governed_memory.http import search_lane
from tests.support.api import Api, MakeApi
from tests.support.fakes import query

#: Headers that differ between two answers by nature: the time of day, the seconds to the
#: rate limit's next window, and the count of the key's rate limit (one request more each
#: time; checked apart).
VARYING = frozenset({"date", "ratelimit-reset", "ratelimit-remaining"})


class Lane:
    """Counts the searches the lane answered itself."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.answered = 0
        answer = search_lane.SearchLane._answer

        async def counted(lane: search_lane.SearchLane, *args: Any) -> None:
            self.answered += 1
            await answer(lane, *args)

        monkeypatch.setattr(search_lane.SearchLane, "_answer", counted)


@pytest.fixture
def lane(monkeypatch: pytest.MonkeyPatch) -> Lane:
    return Lane(monkeypatch)


@pytest.fixture
def api(make_api: MakeApi) -> Api:
    """An app with a small body limit and one memory to find."""
    api = make_api(max_body_bytes=2048)
    api.write(api.key(), "m-1")
    api.write(api.key(), "m-2", subject_id="customer-2", kind="preference")
    return api


def _send(api: Api, lane_on: bool, request: dict[str, Any]) -> httpx.Response:
    api.app.state.search_lane = lane_on
    return api.client.request("POST", request.pop("url", "/v1/search"), **request)


def both(api: Api, **request: Any) -> tuple[httpx.Response, httpx.Response]:
    """The same request through the framework, then through the lane (if it takes it)."""
    framework = _send(api, False, dict(request))
    laned = _send(api, True, dict(request))
    return framework, laned


def assert_same(framework: httpx.Response, laned: httpx.Response) -> None:
    assert laned.status_code == framework.status_code
    assert laned.content == framework.content
    assert [(k, v) for k, v in laned.headers.multi_items() if k not in VARYING] == [
        (k, v) for k, v in framework.headers.multi_items() if k not in VARYING
    ]
    if "ratelimit-remaining" in framework.headers:  # counted once each
        remaining = int(framework.headers["ratelimit-remaining"])
        assert int(laned.headers["ratelimit-remaining"]) == remaining - 1


def test_ordinary_searches_are_answered_by_the_lane_with_the_same_bytes(
    api: Api, lane: Lane
) -> None:
    headers = api.key()
    searches = [
        query("email"),
        query("customer prefers email phone calls", limit=1),
        query("email", subject_id="customer-2", kinds=["preference"]),
        query("email", token_budget=1),
        query("nothing matches this"),
        query("the and of"),  # no indexable term
    ]
    for search in searches:
        framework, laned = both(api, json=search, headers=headers)
        assert framework.status_code == 200, framework.text
        assert_same(framework, laned)
    found = both(api, json=query("email"), headers=headers)[1].json()
    assert {hit["id"] for hit in found["items"]} == {"m-1", "m-2"}
    assert lane.answered == len(searches) + 1


def test_a_charset_utf8_body_is_ordinary(api: Api, lane: Lane) -> None:
    headers = api.key() | {"Content-Type": "application/json; charset=utf-8"}
    framework, laned = both(api, content=json.dumps(query()).encode(), headers=headers)
    assert framework.status_code == 200
    assert_same(framework, laned)
    assert lane.answered == 1


def test_refusals_after_authentication_are_the_apps_problems(api: Api, lane: Lane) -> None:
    """401, 403 and the tenant's refusal, made by the lane as the app's handler makes them."""
    revoked = api.key()
    key_id, _ = split_token(revoked["Authorization"].removeprefix("Bearer "))
    api.store.revoke_api_key(key_id, api.clock.now())
    cases = [
        {},  # no key
        {"Authorization": "Bearer nonsense"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        revoked,
        api.key() | {"X-Tenant-Id": "other"},
        api.key(agents="billing-bot"),  # not its agent
        api.key("memory:write"),  # no memory:read
        api.key(trust="untrusted", agents="support-bot"),
    ]
    for headers in cases:
        framework, laned = both(api, json=query(), headers=headers)
        assert_same(framework, laned)
    statuses = [both(api, json=query(), headers=h)[0].status_code for h in cases]
    assert statuses[:7] == [401, 401, 401, 401, 422, 403, 403]
    assert lane.answered == 2 * len(cases)


def test_unusual_requests_go_the_framework_way_with_the_same_refusals(api: Api, lane: Lane) -> None:
    headers = api.key()
    plain = {"Content-Type": "application/json"}
    cases: list[dict[str, Any]] = [
        {"json": query(limit=0)},
        {"json": query(tenant_id="other")},
        {"json": {"agent_id": "support-bot", "query": "email"}},
        {"json": query(kinds=[])},
        {"json": [query()]},
        {"json": query(limit="10")},  # strict: no string for a number
        {"content": b'{"agent_id": "a", "agent_id": "b", "purpose": "p", "query": "q"}'},
        {"content": b'{"agent_id": "support-bot", "purpose": "support", "query": NaN}'},
        {"content": b"{not json"},
        {"content": "\ufeff{}".encode()},
        {"content": json.dumps(query()).encode("utf-16")},
        {"content": b""},
        {"content": b"x" * 4096},  # over the body limit
        {"json": query(), "params": {"tenant_id": "other"}},
        {"json": query(), "params": {"agent_id": "support-bot"}},
        {"json": query(), "url": "/v1/search/"},
    ]
    for case in cases:
        case["headers"] = headers | plain
        framework, laned = both(api, **case)
        assert framework.status_code != 200, case  # refused, or redirected (the slash)
        assert_same(framework, laned)
    media_types = ["text/plain", "application/json; charset=latin-1", "application/x-json"]
    for media in media_types:
        framework, laned = both(
            api, content=json.dumps(query()).encode(), headers=headers | {"Content-Type": media}
        )
        assert framework.status_code == 415
        assert_same(framework, laned)
    repeated = [
        [*headers.items(), *headers.items(), *plain.items()],
        [*headers.items(), *plain.items(), *plain.items()],
        [*headers.items(), *plain.items(), ("Idempotency-Key", "a"), ("Idempotency-Key", "b")],
    ]
    for raw in repeated:
        framework, laned = both(api, content=json.dumps(query()).encode(), headers=raw)
        assert framework.status_code == 400
        assert_same(framework, laned)
    assert lane.answered == 0


def test_a_rate_limited_search_is_the_apps_429(
    make_api: MakeApi, lane: Lane, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = make_api(rate_limit_requests=3)
    monkeypatch.setattr(api.app.state.limiter, "_clock", lambda: 1_000_030.0)  # mid-window
    headers = api.key()
    framework = [_send(api, False, {"json": query(), "headers": headers}) for _ in range(4)]
    other = api.key()
    laned = [_send(api, True, {"json": query(), "headers": other}) for _ in range(4)]
    for before, now in zip(framework, laned, strict=True):
        assert now.status_code == before.status_code
        assert now.content == before.content
        assert [(k, v) for k, v in now.headers.multi_items() if k != "date"] == [
            (k, v) for k, v in before.headers.multi_items() if k != "date"
        ]
    assert [r.status_code for r in laned] == [200, 200, 200, 429]
    assert "retry-after" in laned[-1].headers


def access_lines(caplog: pytest.LogCaptureFixture) -> list[Any]:
    return [r for r in caplog.records if r.name == "governed_memory.access"]


def test_the_lane_is_named_in_the_access_log_and_the_metrics(
    api: Api, lane: Lane, caplog: pytest.LogCaptureFixture
) -> None:
    headers = api.key()
    with caplog.at_level("INFO", logger="governed_memory.access"):
        _send(api, True, {"json": query(), "headers": headers})
        _send(api, True, {"json": query(), "headers": {}})
        deadline = time.monotonic() + 10  # a request's line is written after its answer
        while len(access_lines(caplog)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    lines = access_lines(caplog)
    assert [(r.route, r.status, r.method) for r in lines] == [  # type: ignore[attr-defined]
        ("/v1/search", 200, "POST"),
        ("/v1/search", 401, "POST"),
    ]
    exposition = api.client.get("/metrics").text
    assert 'gmem_http_requests_total{method="POST",route="/v1/search",status="200"} 1.0' in (
        exposition
    )
    assert "gmem_search_duration_seconds_count 1.0" in exposition
    assert lane.answered == 2


def test_a_streamed_body_is_read_whole_or_refused_at_the_limit(api: Api, lane: Lane) -> None:
    headers = api.key() | {"Content-Type": "application/json"}
    document = json.dumps(query("email")).encode()

    def chunks(data: bytes) -> Any:  # sent chunked, without a Content-Length
        return iter([data[:10], data[10:20], data[20:]])

    framework = _send(api, False, {"content": chunks(document), "headers": headers})
    laned = _send(api, True, {"content": chunks(document), "headers": headers})
    assert framework.status_code == 200
    assert_same(framework, laned)
    assert lane.answered == 1
    padded = json.dumps(query("email " * 600)).encode()  # over the 2048-byte limit
    framework = _send(api, False, {"content": chunks(padded), "headers": headers})
    laned = _send(api, True, {"content": chunks(padded), "headers": headers})
    assert framework.status_code == 413
    assert_same(framework, laned)
