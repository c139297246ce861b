"""Hostile requests get a clear 4xx problem, never a 5xx, never another tenant's data.

One app serves two tenants: ``globex`` holds memories with a canary string, ``acme`` is the
attacker. Every request here is malformed, oversized, spoofed or an injection attempt;
each must be refused with a 4xx ``application/problem+json`` that does not contain the
canary, and the event log head must not move.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from governed_memory.analysis import Analyzer
from tests.support.api import ALL_MEMORY_SCOPES, Api, build_api
from tests.support.fakes import query as search_body
from tests.support.fakes import write_body

CANARY = "globexcanary" + secrets.token_hex(6)
ANALYZER = Analyzer()  # the service's default: what a query and a memory have in common
PROBLEM = "application/problem+json"


@dataclass
class World:
    """The app, the attacker's keys and the victim's item ids."""

    api: Api
    acme: dict[str, str]
    agent: dict[str, str]
    globex: dict[str, str]
    victim_ids: list[str]

    def url(self, path: str) -> httpx.URL:
        """An absolute URL whose path is sent as written (spaces aside)."""
        return httpx.URL(str(self.api.client.base_url).rstrip("/") + path.replace(" ", "%20"))

    def refused(self, response: httpx.Response, *statuses: int) -> dict[str, Any]:
        """A 4xx problem (of one of ``statuses`` if given) that leaks nothing."""
        assert 400 <= response.status_code < 500, response.text[:500]
        if statuses:
            assert response.status_code in statuses, response.text[:500]
        assert response.headers["content-type"] == PROBLEM
        problem: dict[str, Any] = response.json()
        assert {"type", "title", "status", "detail"} <= set(problem)
        assert problem["status"] == response.status_code
        assert CANARY not in response.text
        assert "Traceback" not in response.text
        assert len(response.content) < 16_384  # a refusal is never larger than a page
        return problem


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """Globex's canary memories, and keys of both tenants, on one app."""
    with ExitStack() as stack:
        api = build_api(tmp_path_factory.mktemp("hostile"), stack, rate_limit_requests=10**9)
        globex = api.key(tenant="globex")
        ids = []
        for n, trust in enumerate(["trusted", "untrusted", "trusted"]):
            item = api.write(
                globex, f"shared-{n}", content=f"Globex secret {CANARY} number {n}.", trust=trust
            )
            ids.append(item["id"])
        acme = api.key(ALL_MEMORY_SCOPES)
        api.write(acme, "acme-1", content="An acme memory about email and everything.")
        agent = api.key("memory:write,memory:read", trust="untrusted", agents="support-bot")
        yield World(api, acme, agent, globex, ids)


@pytest.fixture
def unchanged(world: World) -> Iterator[None]:
    """The test must not append anything to the log."""
    head = world.api.service.store.head()
    yield
    assert world.api.service.store.head() == head


def raw(world: World, method: str, path: str, body: bytes | str, **headers: str) -> httpx.Response:
    """Send ``body`` byte for byte as JSON, with acme's key unless told otherwise."""
    content = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    sent = world.acme | {"Content-Type": "application/json"} | headers
    return world.api.client.request(method, path, content=content, headers=sent)


WRITE = json.dumps(write_body(content="A hostile write."))
SEARCH = json.dumps(search_body())
TARGETS = [
    ("POST", "/v1/memories", WRITE),
    ("PUT", "/v1/memories/hostile-1", WRITE),
    ("POST", "/v1/search", SEARCH),
    ("POST", "/v1/memories/shared-1/promote", '{"expected_version": 1}'),
    ("POST", "/v1/memories/shared-1/reject", '{"expected_version": 1}'),
    ("POST", "/v1/subjects/customer-1/forget", "{}"),
]
TARGET_IDS = [f"{method} {path}" for method, path, _ in TARGETS]


def with_member(body: str, member: str) -> str:
    """``body`` (a JSON object) with ``member`` (raw JSON text) added at its end."""
    return body[:-1] + ("," if body != "{}" else "") + member + "}"


# -- malformed JSON ----------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body"), TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize(
    "member",
    [
        '"trust": "untrusted", "trust": "trusted"',
        '"agent_id": "support-bot", "agent_id": "sales-bot"',
        '"tenant_id": "acme", "tenant_id": "globex"',
        '"expected_version": 1, "expected_version": 0',
    ],
    ids=["trust", "agent", "tenant", "version"],
)
def test_a_repeated_member_name_is_refused_whichever_comes_first(
    world: World, unchanged: None, method: str, path: str, body: str, member: str
) -> None:
    """Duplicate keys are 400, never last-wins: no field can be smuggled past a proxy."""
    for first, second in [member.split(", "), reversed(member.split(", "))]:
        response = raw(world, method, path, with_member(body, f"{first}, {second}"))
        problem = world.refused(response, 400)
        assert problem["detail"].endswith("duplicate member name")


def test_a_repeated_member_inside_a_nested_object_is_refused(world: World, unchanged: None) -> None:
    """Provenance is an object too: a duplicate ``source`` there is refused the same way."""
    body = WRITE.replace('"source": "crm"', '"source": "crm", "source": "system"')
    world.refused(raw(world, "POST", "/v1/memories", body), 400)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(world: World, unchanged: None, literal: str) -> None:
    """Python's parser would accept them; JSON does not, so neither does the API."""
    body = WRITE.replace('"confidence": 0.9', f'"confidence": {literal}')
    world.refused(raw(world, "POST", "/v1/memories", body), 400)


@pytest.mark.parametrize(
    "body",
    [
        "[" * 30_000 + "]" * 30_000,
        '{"a":' * 10_000 + "1" + "}" * 10_000,
        with_member(WRITE, '"extra": ' + "[" * 20_000 + "]" * 20_000),
        WRITE.replace('"ref": "ticket-1"', '"ref": ' + '{"a": ' * 500 + "1" + "}" * 500),
        b'{"agent_id": "\xff\xfe"}',
        '{"agent_id": "support-bot"',
        "",
        "null",
        '"a string"',
        "[]",
        WRITE.replace('"expected_version": 0', '"expected_version": ' + "9" * 5000),
        WRITE.replace('"expected_version": 0', '"expected_version": 1e400'),
        WRITE.replace('"confidence": 0.9', '"confidence": -1e400'),
    ],
    ids=[
        "deep-array",
        "deep-object",
        "deep-in-a-field",
        "nested-where-text-is-due",
        "invalid-utf8",
        "truncated",
        "empty",
        "null",
        "string",
        "array",
        "5000-digit-number",
        "1e400",
        "minus-1e400",
    ],
)
def test_malformed_or_deeply_nested_bodies_are_4xx(
    world: World, unchanged: None, body: str | bytes
) -> None:
    """Nesting, truncation, bad UTF-8 and absurd numbers are 400 or 422, never a 5xx."""
    world.refused(raw(world, "POST", "/v1/memories", body), 400, 422)


# -- oversized ---------------------------------------------------------------------------


def test_an_oversized_body_is_413(world: World, unchanged: None) -> None:
    """A body over 64 KiB is refused before it is read."""
    body = json.dumps(write_body(content="x" * 70_000))
    world.refused(raw(world, "POST", "/v1/memories", body), 413)


def test_content_over_8000_characters_is_422(world: World, unchanged: None) -> None:
    """Within the body limit but over the content limit: 422 naming content."""
    body = json.dumps(write_body(content="y" * 8_001))
    problem = world.refused(raw(world, "POST", "/v1/memories", body), 422)
    assert [e["field"] for e in problem["errors"]] == ["content"]


def test_thousands_of_unknown_members_get_a_bounded_problem(world: World, unchanged: None) -> None:
    """6,000 unknown members: a 422 that lists 50 and counts the rest, not a 300 KB echo."""
    members = ",".join(f'"m{n}": 1' for n in range(6_000))
    problem = world.refused(raw(world, "POST", "/v1/memories", "{" + members + "}"), 422)
    assert len(problem["errors"]) == 50
    assert problem["errors_omitted"] > 6_000 - 50
    assert problem["detail"].endswith("more")


def test_a_huge_member_name_is_not_echoed_whole(world: World, unchanged: None) -> None:
    """An unknown member's name is the caller's text: the problem keeps 128 characters of it."""
    name = "n" * 40_000
    problem = world.refused(raw(world, "POST", "/v1/memories", with_member(WRITE, f'"{name}": 1')))
    assert all(len(e["field"]) <= 129 for e in problem["errors"])


# -- NUL and lone surrogates -------------------------------------------------------------

TEXT_FIELDS = [
    ("POST", "/v1/memories", WRITE, '"A hostile write."'),
    ("POST", "/v1/memories", WRITE, '"crm"'),
    ("POST", "/v1/memories", WRITE, '"ticket-1"'),
    ("POST", "/v1/memories", WRITE, '"support-bot"'),
    ("POST", "/v1/memories", WRITE, '"customer-1"'),
    ("POST", "/v1/memories", WRITE, '"support"'),
    ("POST", "/v1/memories", with_member(WRITE, '"supersedes_id": "acme-1"'), '"acme-1"'),
    ("POST", "/v1/memories", WRITE.replace('"crm"', '"crm", "version": "v1"'), '"v1"'),
    ("POST", "/v1/search", SEARCH, '"email"'),
    ("POST", "/v1/memories/shared-1/reject", '{"expected_version": 1, "reason": "no"}', '"no"'),
]


@pytest.mark.parametrize(("method", "path", "body", "value"), TEXT_FIELDS)
@pytest.mark.parametrize("escape", ["\\u0000", "\\ud800", "\\udfff", "\\ud800\\u0041"])
def test_nul_and_lone_surrogates_are_422_in_every_text_field(
    world: World, unchanged: None, method: str, path: str, body: str, value: str, escape: str
) -> None:
    """JSON escapes of NUL or an unpaired surrogate never reach a store (SPEC §13)."""
    poisoned = body.replace(value, value[:-1] + escape + '"', 1)
    assert poisoned != body
    world.refused(raw(world, method, path, poisoned), 422)


# -- ids and queries ---------------------------------------------------------------------

INJECTED_IDS = [
    "*",
    "%25",
    "%",
    "'",
    "' OR '1'='1",
    '"; DROP TABLE events; --',
    "..%2F..%2Fetc%2Fpasswd",
    "a%00b",
    "NEAR(a b)",
    "id OR 1=1",
    "x" * 129,
    "x" * 5_000,
    "shared-1%20",
    "%C0%AE%C0%AE",
    "$where",
]


@pytest.mark.parametrize("memory_id", INJECTED_IDS)
@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("GET", "", None),
        ("GET", "/history", None),
        ("PUT", "", WRITE),
        ("POST", "/promote", '{"expected_version": 1}'),
        ("POST", "/reject", '{"expected_version": 1}'),
    ],
    ids=["get", "history", "put", "promote", "reject"],
)
def test_an_injected_or_huge_id_is_refused_before_any_query(
    world: World, unchanged: None, memory_id: str, method: str, suffix: str, body: str | None
) -> None:
    """Ids outside the pattern are 422 (or 404 when they are no route); nothing leaks."""
    response = world.api.client.request(
        method,
        world.url(f"/v1/memories/{memory_id}{suffix}"),
        content=None if body is None else body.encode(),
        headers=world.acme | {"Content-Type": "application/json"},
    )
    world.refused(response, 404, 405, 422)


@pytest.mark.parametrize(
    "subject",
    ["*", "%25", "'%20OR%20'1'='1", "..%2F..", "x" * 129, "customer-1;DROP", "customer%00"],
)
def test_an_injected_subject_cannot_be_forgotten(
    world: World, unchanged: None, subject: str
) -> None:
    """Forget refuses a subject outside the pattern; no wildcard ever forgets anything."""
    url = world.url(f"/v1/subjects/{subject}/forget")
    world.refused(world.api.client.post(url, json={}, headers=world.acme), 404, 422)


def test_a_dotted_id_is_just_an_id(world: World, unchanged: None) -> None:
    """``..`` matches the id pattern; it names no file and no other item: 404."""
    url = world.url("/v1/memories/%2E%2E")
    world.refused(world.api.client.get(url, headers=world.acme), 404)


@pytest.mark.parametrize(
    "query",
    [
        "*",
        "%",
        "_",
        "%%",
        "'",
        "' OR 1=1 --",
        '" OR ""="',
        "NEAR(email everything)",
        "content:*",
        "email* OR *",
        "email) OR (1=1",
        "\\",
        '{"$gt": ""}',
        "%' UNION SELECT content FROM memories --",
        "globex",
        CANARY,
        f"{CANARY}*",
    ],
)
def test_query_syntax_is_only_text_and_never_crosses_tenants(
    world: World, unchanged: None, query: str
) -> None:
    """Wildcards, SQL and FTS syntax match nothing they do not contain as text (a hit
    shares a term of the analyzer with the query: "memories" finds "memory")."""
    for agent, purpose in [("support-bot", "support"), ("sales-bot", "sales")]:
        response = world.api.client.post(
            "/v1/search",
            json=search_body(agent_id=agent, purpose=purpose, query=query),
            headers=world.acme,
        )
        assert response.status_code == 200, response.text
        assert CANARY not in response.text
        terms = set(ANALYZER.query_terms(query))
        for hit in response.json()["items"]:
            assert hit["tenant_id"] == "acme"
            assert terms & set(ANALYZER.index_terms(hit["content"]))


@pytest.mark.parametrize(
    "params",
    [
        {"agent_id": "*"},
        {"agent_id": "%"},
        {"purpose": "%"},
        {"purpose": "' OR 1=1 --"},
        {"cursor": "' OR 1=1 --"},
        {"cursor": "*"},
        {"limit": "1 OR 1=1"},
        {"limit": "100000"},
    ],
)
def test_quarantine_filters_are_validated(
    world: World, unchanged: None, params: dict[str, str]
) -> None:
    """Filters outside their patterns are 422, not a wider query."""
    world.refused(world.api.client.get("/v1/quarantine", params=params, headers=world.acme), 422)


def test_a_forged_cursor_naming_a_foreign_item_shows_only_the_callers_queue(
    world: World, unchanged: None
) -> None:
    """A well-formed cursor that points at globex's item still pages acme's queue only."""
    forged = base64.urlsafe_b64encode(json.dumps([0, "shared-1"]).encode()).decode().rstrip("=")
    response = world.api.client.get("/v1/quarantine", params={"cursor": forged}, headers=world.acme)
    assert response.status_code == 200
    assert CANARY not in response.text
    assert all(item["tenant_id"] == "acme" for item in response.json()["items"])


@pytest.mark.parametrize("after", ["-1", "1 OR 1=1", "0x10", "1e3", "9" * 400, "1.5", ""])
def test_events_after_must_be_a_plain_position(world: World, unchanged: None, after: str) -> None:
    """``after`` is a non-negative integer below 2**53, nothing else."""
    response = world.api.client.get("/v1/events", params={"after": after}, headers=world.acme)
    world.refused(response, 422)


# -- tenant spoofing ---------------------------------------------------------------------

REQUESTS = [
    ("POST", "/v1/memories", WRITE),
    ("PUT", "/v1/memories/spoof-1", WRITE),
    ("GET", "/v1/memories/shared-0", None),
    ("GET", "/v1/memories/shared-0/history", None),
    ("POST", "/v1/memories/shared-1/promote", '{"expected_version": 1}'),
    ("POST", "/v1/memories/shared-1/reject", '{"expected_version": 1}'),
    ("GET", "/v1/quarantine", None),
    ("POST", "/v1/search", json.dumps(search_body(query=CANARY))),
    ("POST", "/v1/subjects/customer-1/forget", "{}"),
    ("GET", "/v1/events", None),
]
REQUEST_IDS = [f"{method} {path}" for method, path, _ in REQUESTS]


def send(world: World, method: str, path: str, body: str | None, **kwargs: Any) -> httpx.Response:
    headers = world.acme | {"Content-Type": "application/json"} | kwargs.pop("headers", {})
    content = None if body is None else body.encode()
    return world.api.client.request(method, path, content=content, headers=headers, **kwargs)


@pytest.mark.parametrize(("method", "path", "body"), REQUESTS, ids=REQUEST_IDS)
@pytest.mark.parametrize("name", ["tenant_id", "tenant", "TENANT_ID", "tenantId"])
def test_a_tenant_named_in_the_query_is_refused_everywhere(
    world: World, unchanged: None, method: str, path: str, body: str | None, name: str
) -> None:
    """Any query parameter naming a tenant is 422 on every endpoint."""
    response = send(world, method, path, body, params={name: "globex"})
    world.refused(response, 422)


@pytest.mark.parametrize(("method", "path", "body"), REQUESTS, ids=REQUEST_IDS)
@pytest.mark.parametrize("header", ["X-Tenant-Id", "X-Tenant", "Tenant-Id"])
def test_a_tenant_named_in_a_header_is_refused_everywhere(
    world: World, unchanged: None, method: str, path: str, body: str | None, header: str
) -> None:
    """Any tenant header is 422 on every endpoint."""
    world.refused(send(world, method, path, body, headers={header: "globex"}), 422)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [r for r in REQUESTS if r[2] is not None],
    ids=[i for i, r in zip(REQUEST_IDS, REQUESTS, strict=True) if r[2] is not None],
)
@pytest.mark.parametrize("name", ["tenant_id", "tenant", "tenantId"])
def test_a_tenant_named_in_the_body_is_refused_everywhere(
    world: World, unchanged: None, method: str, path: str, body: str, name: str
) -> None:
    """Any body member naming a tenant is 422 (or 400 if it repeats one) on every endpoint."""
    response = send(world, method, path, with_member(body, f'"{name}": "globex"'))
    world.refused(response, 422)


def test_a_foreign_item_is_not_found_by_any_route(world: World, unchanged: None) -> None:
    """Globex's ids answer acme exactly like ids that do not exist."""
    for memory_id in world.victim_ids:
        for path in [f"/v1/memories/{memory_id}", f"/v1/memories/{memory_id}/history"]:
            problem = world.refused(world.api.client.get(path, headers=world.acme), 404)
            unknown = world.api.client.get(
                path.replace(memory_id, "no-such-id"), headers=world.acme
            )
            assert problem["type"] == unknown.json()["type"]
        for action in ["promote", "reject"]:
            response = world.api.client.post(
                f"/v1/memories/{memory_id}/{action}",
                json={"expected_version": 1},
                headers=world.acme,
            )
            world.refused(response, 404)


def test_a_foreign_idempotency_key_replays_nothing(world: World) -> None:
    """Acme reusing globex's idempotency key gets its own write, never globex's item."""
    body = write_body(content="A globex write with a key.")
    first = world.api.client.post(
        "/v1/memories", json=body, headers=world.globex | {"Idempotency-Key": "shared-key"}
    )
    assert first.status_code == 201
    mine = world.api.client.post(
        "/v1/memories", json=body, headers=world.acme | {"Idempotency-Key": "shared-key"}
    )
    assert mine.status_code == 201
    assert mine.json()["tenant_id"] == "acme"
    assert mine.json()["id"] != first.json()["id"]


# -- headers -----------------------------------------------------------------------------


def test_two_authorization_headers_are_refused(world: World, unchanged: None) -> None:
    """Two credentials are ambiguous (a proxy may pick either): 400, before any key is used."""
    headers = [
        ("Authorization", world.acme["Authorization"]),
        ("Authorization", world.globex["Authorization"]),
    ]
    response = world.api.client.get("/v1/memories/shared-0", headers=headers)
    world.refused(response, 400)


def test_two_idempotency_keys_are_refused(world: World, unchanged: None) -> None:
    """A request with two Idempotency-Key headers is refused, not run under either."""
    headers = [
        ("Authorization", world.acme["Authorization"]),
        ("Idempotency-Key", "one"),
        ("Idempotency-Key", "two"),
    ]
    response = world.api.client.post("/v1/memories", json=write_body(), headers=headers)
    world.refused(response, 400)


@pytest.mark.parametrize(
    "query",
    [
        [("after", "0"), ("after", "1")],
        [("agent_id", "support-bot"), ("agent_id", "sales-bot")],
    ],
)
def test_a_repeated_query_parameter_is_refused(
    world: World, unchanged: None, query: list[tuple[str, str]]
) -> None:
    """``?agent_id=a&agent_id=b`` is refused, not silently read as one of them."""
    path = "/v1/events" if query[0][0] == "after" else "/v1/quarantine"
    world.refused(world.api.client.get(path, params=query, headers=world.acme), 422)


@pytest.mark.parametrize(
    "key",
    ["x" * 256, "has space", "tab\tkey", "caf\u00e9".encode(), ""],
    ids=["too-long", "space", "tab", "non-ascii", "empty"],
)
def test_an_invalid_idempotency_key_is_422(world: World, unchanged: None, key: str | bytes) -> None:
    """Idempotency keys are 1..255 visible ASCII characters."""
    headers: dict[str, str | bytes] = {**world.acme, "Idempotency-Key": key}
    response = world.api.client.post("/v1/memories", json=write_body(), headers=headers)
    world.refused(response, 422)


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer " + "x" * 6_000,
        "Bearer gmem_'; DROP TABLE api_keys;--_x",
        "Bearer gmem_%_%",
        "Bearer gmem_*_*",
        "Bearer gmem_../../master.key_x",
    ],
)
def test_a_forged_key_is_401(world: World, unchanged: None, authorization: str) -> None:
    """Key ids are never a query pattern or a path: a forged one is simply unknown."""
    response = world.api.client.get("/v1/memories/acme-1", headers={"Authorization": authorization})
    world.refused(response, 401)


def test_the_agent_key_cannot_claim_trust_through_any_field(world: World, unchanged: None) -> None:
    """An untrusted agent key claiming trusted or verified is 403 or 422, never a write."""
    for trust in ["trusted", "verified", "TRUSTED", "admin"]:
        response = world.api.client.post(
            "/v1/memories", json=write_body(trust=trust), headers=world.agent
        )
        world.refused(response, 403, 422)
