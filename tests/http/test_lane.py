"""``POST /v1/search``, ``POST /v1/memories`` and ``PUT /v1/memories/{id}`` answered by the
lane (http/lane.py) are the same answer, byte for byte, as through the framework's
dispatch: the same status, headers and body for an ordinary search or write and for every
refusal, each request counted once against its key's rate limit, named by its route in the
access log and the metrics. An ordinary request is answered by the lane; anything unusual
goes the framework's way as before."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import httpx
import pytest

from governed_memory.apikeys import split_token
from governed_memory.http import lane as lanes
from tests.support.api import Api, MakeApi
from tests.support.fakes import query, write_body

#: Headers that differ between two answers by nature: the time of day, the seconds to the
#: rate limit's next window, and the count of the key's rate limit (one request more each
#: time; checked apart).
VARYING = frozenset({"date", "ratelimit-reset", "ratelimit-remaining"})


class Lane:
    """Counts the requests the lane answered itself."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.answered = 0
        answer = lanes.Lane._answer

        async def counted(lane: lanes.Lane, *args: Any) -> None:
            self.answered += 1
            await answer(lane, *args)

        monkeypatch.setattr(lanes.Lane, "_answer", counted)


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
    api.app.state.lane = lane_on
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


def logged(caplog: pytest.LogCaptureFixture, count: int) -> list[tuple[str, int, str]]:
    """The route, status and method of the first ``count`` access-log lines, once written
    (a request's line is written after its answer)."""
    deadline = time.monotonic() + 10
    while len(access_lines(caplog)) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return [(r.route, r.status, r.method) for r in access_lines(caplog)]


def test_the_lane_is_named_in_the_access_log_and_the_metrics(
    api: Api, lane: Lane, caplog: pytest.LogCaptureFixture
) -> None:
    headers = api.key()
    with caplog.at_level("INFO", logger="governed_memory.access"):
        _send(api, True, {"json": query(), "headers": headers})
        _send(api, True, {"json": query(), "headers": {}})
        assert logged(caplog, 2) == [
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


# -- writes --------------------------------------------------------------------------------

FRAMEWORK, LANED = "fw", "ln"  # the two sides' ids and idempotency keys differ by these


def _write(api: Api, side: str, method: str, path: str, **request: Any) -> httpx.Response:
    """A write through the framework (``FRAMEWORK``) or the lane (``LANED``), ``{side}`` in
    its path and idempotency key naming the side."""
    api.app.state.lane = side == LANED
    headers = dict(request.pop("headers", {}))
    if "Idempotency-Key" in headers:
        headers["Idempotency-Key"] = headers["Idempotency-Key"].format(side=side)
    return api.client.request(method, path.format(side=side), headers=headers, **request)


def _as_framework(response: httpx.Response) -> tuple[int, bytes, list[tuple[str, str]]]:
    """A response with its side's ids spelt as the framework side's, a server-made id
    (``POST``) as ``ID`` and the content hash (the service's, keyed by the id) as ``HASH``."""
    content = response.content.replace(f"-{LANED}-".encode(), f"-{FRAMEWORK}-".encode())
    content = re.sub(rb'"content_hash":"[0-9a-f]{64}"', b'"content_hash":"HASH"', content)
    headers = [
        (k, v.replace(f"-{LANED}-", f"-{FRAMEWORK}-"))
        for k, v in response.headers.multi_items()
        if k not in VARYING
    ]
    made = response.json().get("id") if response.status_code == 201 else None
    if made is not None and not made.startswith("m-"):
        content = content.replace(made.encode(), b"ID")
        headers = [(k, v.replace(made, "ID")) for k, v in headers]
    return response.status_code, content, headers


def both_writes(
    api: Api, method: str, path: str, **request: Any
) -> tuple[httpx.Response, httpx.Response]:
    """The same write through the framework, then through the lane (if it takes it)."""
    framework = _write(api, FRAMEWORK, method, path, **dict(request))
    laned = _write(api, LANED, method, path, **dict(request))
    before, now = _as_framework(framework), _as_framework(laned)
    assert now[:2] == before[:2]
    assert [h for h in now[2] if h[0] != "content-length"] == [
        h for h in before[2] if h[0] != "content-length"
    ]
    return framework, laned


def test_ordinary_writes_are_answered_by_the_lane_with_the_same_bytes(api: Api, lane: Lane) -> None:
    headers = api.key()
    replay = headers | {"Idempotency-Key": "k-{side}-create"}
    cases: list[tuple[str, str, dict[str, Any], int]] = [
        ("PUT", "/v1/memories/m-{side}-1", {"json": write_body()}, 201),
        ("PUT", "/v1/memories/m-{side}-1", {"json": write_body(expected_version=1)}, 200),
        ("PUT", "/v1/memories/m-{side}-1", {"json": write_body(expected_version=1)}, 409),
        ("PUT", "/v1/memories/m-{side}-2", {"json": write_body(expected_version=3)}, 409),
        ("PUT", "/v1/memories/m-{side}-3", {"json": write_body(), "headers": replay}, 201),
        ("PUT", "/v1/memories/m-{side}-3", {"json": write_body(), "headers": replay}, 201),
        ("PUT", "/v1/memories/m-{side}-4", {"json": write_body(), "headers": replay}, 409),
        ("POST", "/v1/memories", {"json": write_body(expected_version=None)}, 201),
        (
            "POST",
            "/v1/memories",
            {"json": write_body(expected_version=None, kind="preference")},
            201,
        ),
    ]
    for method, path, request, status in cases:
        request.setdefault("headers", headers)
        framework, _ = both_writes(api, method, path, **request)
        assert framework.status_code == status, (path, framework.text)
    stored = api.client.get(f"/v1/memories/m-{LANED}-1", headers=headers).json()
    assert stored["version"] == 2
    assert lane.answered == len(cases)


def test_write_refusals_after_authentication_are_the_apps_problems(api: Api, lane: Lane) -> None:
    revoked = api.key()
    key_id, _ = split_token(revoked["Authorization"].removeprefix("Bearer "))
    api.store.revoke_api_key(key_id, api.clock.now())
    untrusted = api.key(trust="untrusted")
    cases: list[tuple[dict[str, str], dict[str, Any]]] = [
        ({}, {}),  # no key
        ({"Authorization": "Bearer nonsense"}, {}),
        (revoked, {}),
        (api.key() | {"X-Tenant-Id": "other"}, {}),
        (api.key(agents="billing-bot"), {}),  # not its agent
        (api.key("memory:read"), {}),  # no memory:write
        (untrusted, {}),  # it may not write trusted memories
        (untrusted, {"trust": "untrusted"}),  # accepted, into quarantine
    ]
    statuses = []
    for headers, overrides in cases:
        for method, path in (("PUT", "/v1/memories/m-{side}-9"), ("POST", "/v1/memories")):
            body = write_body(expected_version=None if method == "POST" else 0, **overrides)
            framework, _ = both_writes(api, method, path, json=body, headers=headers)
            statuses.append(framework.status_code)
    assert statuses == [401] * 6 + [422] * 2 + [403] * 6 + [201] * 2
    assert lane.answered == 2 * len(cases)  # PUT and POST, the lane side of each


def test_unusual_writes_go_the_framework_way_with_the_same_refusals(api: Api, lane: Lane) -> None:
    headers = api.key() | {"Content-Type": "application/json"}
    put = "/v1/memories/m-{side}-1"
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("PUT", "/v1/memories/m {side} 1", {"json": write_body()}),  # not an id
        ("PUT", "/v1/memories/" + "m" * 300 + "{side}", {"json": write_body()}),
        ("PUT", "/v1/memories/m-{side}-1/x", {"json": write_body()}),
        ("PUT", "/v1/memories/m-{side}-1/", {"json": write_body()}),
        ("POST", "/v1/memories/", {"json": write_body(expected_version=None)}),
        ("PUT", put, {"json": write_body(), "params": {"agent_id": "support-bot"}}),
        ("PUT", put, {"json": write_body(kind="opinion")}),
        ("PUT", put, {"json": write_body(content=None)}),
        ("PUT", put, {"json": write_body(extra="member")}),
        ("PUT", put, {"json": write_body(expected_version="0")}),
        ("PUT", put, {"json": write_body(tenant_id="other")}),
        ("PUT", put, {"content": b'{"kind": "fact", "kind": "event"}'}),
        ("PUT", put, {"content": b""}),
        ("PUT", put, {"content": json.dumps(write_body(content="x" * 4096)).encode()}),
        ("PUT", put, {"json": write_body(), "headers": headers | {"Idempotency-Key": "a b"}}),
        ("PUT", put, {"json": write_body(), "headers": headers | {"Idempotency-Key": ""}}),
    ]
    for method, path, request in cases:
        request.setdefault("headers", headers)
        framework, _ = both_writes(api, method, path, **request)
        assert framework.status_code not in (200, 201), (path, request)
    for media in ("text/plain", "application/json; charset=latin-1"):
        media_headers = headers | {"Content-Type": media}
        framework, _ = both_writes(
            api, "PUT", put, content=json.dumps(write_body()).encode(), headers=media_headers
        )
        assert framework.status_code == 415
    raw = [*api.key().items(), ("Content-Type", "application/json")]
    repeated = [*raw, ("Idempotency-Key", "a-{side}"), ("Idempotency-Key", "b-{side}")]
    for method, path in (("PUT", put), ("POST", "/v1/memories")):
        api.app.state.lane = False
        framework = api.client.request(
            method, path.format(side=FRAMEWORK), content=b"{}", headers=repeated
        )
        api.app.state.lane = True
        laned = api.client.request(
            method, path.format(side=FRAMEWORK), content=b"{}", headers=repeated
        )
        assert framework.status_code == 400
        assert (laned.status_code, laned.content) == (framework.status_code, framework.content)
    assert lane.answered == 0


def test_a_write_is_named_by_its_route_in_the_access_log_and_the_metrics(
    api: Api, lane: Lane, caplog: pytest.LogCaptureFixture
) -> None:
    headers = api.key()
    with caplog.at_level("INFO", logger="governed_memory.access"):
        _write(api, LANED, "PUT", "/v1/memories/m-{side}-1", json=write_body(), headers=headers)
        body = write_body(expected_version=None)
        _write(api, LANED, "POST", "/v1/memories", json=body, headers=headers)
        assert logged(caplog, 2) == [
            ("/v1/memories/{id}", 201, "PUT"),
            ("/v1/memories", 201, "POST"),
        ]
    exposition = api.client.get("/metrics").text
    # The fixture's two PUTs through the app and this one, and this POST.
    for route, method, count in (("/v1/memories/{id}", "PUT", 3), ("/v1/memories", "POST", 1)):
        labels = f'method="{method}",route="{route}",status="201"'
        sample = f"gmem_http_requests_total{{{labels}}} {count}.0"
        assert sample in exposition
    assert lane.answered == 2
