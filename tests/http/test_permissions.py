"""The permissions matrix: every endpoint × every scope × own and foreign tenant (SPEC §5).

A key without the endpoint's scope gets 403 whatever it targets. With the scope, its own
tenant's data works, and another tenant's item is 404 — exactly like an id nobody wrote —
while collection endpoints never show another tenant's data.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.api import Api, build_api
from tests.support.fakes import query as search_body
from tests.support.fakes import write_body

SCOPES = ["memory:write", "memory:read", "memory:review", "subject:forget", "audit:read", "admin"]
FOREIGN_WORD = "zanzibar"


@dataclass(frozen=True)
class Case:
    """One row's data: fresh items of acme (own) and of globex (foreign)."""

    n: int
    quarantined: str  # acme, untrusted, written by the acme writer
    active: str  # acme, trusted
    subject: str  # acme subject of both
    foreign: str  # globex, untrusted
    foreign_subject: str


@dataclass(frozen=True)
class World:
    api: Api
    writers: dict[str, dict[str, str]]
    keys: dict[str, dict[str, str]]
    counter: Iterator[int]

    def case(self) -> Case:
        n = next(self.counter)
        c = Case(n, f"q-{n}", f"a-{n}", f"subj-{n}", f"f-{n}", f"fsubj-{n}")
        acme, globex = self.writers["acme"], self.writers["globex"]
        self.api.write(acme, c.quarantined, subject_id=c.subject, trust="untrusted")
        self.api.write(acme, c.active, subject_id=c.subject)
        self.api.write(
            globex,
            c.foreign,
            subject_id=c.foreign_subject,
            trust="untrusted",
            content=f"The {FOREIGN_WORD} account prefers email.",
        )
        return c


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One served app for the whole matrix; each case writes fresh items."""
    with ExitStack() as stack:
        api = build_api(Path(tmp_path_factory.mktemp("matrix")), stack)
        writers = {tenant: api.key(tenant=tenant) for tenant in ("acme", "globex")}
        keys = {scope: api.key(scope) for scope in SCOPES if scope != "admin"}
        keys["admin"] = api.legacy_key("admin")  # no new key may carry it: it grants nothing
        yield World(api, writers, keys, itertools.count())


Call = Callable[[httpx.Client, dict[str, str], Case, bool], httpx.Response]


def _put(client: httpx.Client, h: dict[str, str], c: Case, foreign: bool) -> httpx.Response:
    target = c.foreign if foreign else c.active
    body = write_body(subject_id=c.subject, expected_version=1)
    return client.put(f"/v1/memories/{target}", json=body, headers=h)


def _post(client: httpx.Client, h: dict[str, str], c: Case, foreign: bool) -> httpx.Response:
    body = write_body(subject_id=c.subject) | ({"tenant_id": "globex"} if foreign else {})
    return client.post("/v1/memories", json=body, headers=h)


def _get(client: httpx.Client, h: dict[str, str], c: Case, foreign: bool) -> httpx.Response:
    return client.get(f"/v1/memories/{c.foreign if foreign else c.active}", headers=h)


def _erase(client: httpx.Client, h: dict[str, str], c: Case, foreign: bool) -> httpx.Response:
    return client.delete(f"/v1/memories/{c.foreign if foreign else c.active}", headers=h)


def _browse(client: httpx.Client, h: dict[str, str], c: Case, foreign: bool) -> httpx.Response:
    return client.get("/v1/memories", params={"limit": 500}, headers=h)


def _history(client: httpx.Client, h: dict[str, str], c: Case, foreign: bool) -> httpx.Response:
    return client.get(f"/v1/memories/{c.foreign if foreign else c.active}/history", headers=h)


def _promote(client: httpx.Client, h: dict[str, str], c: Case, foreign: bool) -> httpx.Response:
    target = c.foreign if foreign else c.quarantined
    return client.post(f"/v1/memories/{target}/promote", json={"expected_version": 1}, headers=h)


def _reject(client: httpx.Client, h: dict[str, str], c: Case, foreign: bool) -> httpx.Response:
    target = c.foreign if foreign else c.quarantined
    return client.post(f"/v1/memories/{target}/reject", json={"expected_version": 1}, headers=h)


def _quarantine(client: httpx.Client, h: dict[str, str], c: Case, foreign: bool) -> httpx.Response:
    return client.get("/v1/quarantine", params={"limit": 500}, headers=h)


def _search(client: httpx.Client, h: dict[str, str], c: Case, foreign: bool) -> httpx.Response:
    query = FOREIGN_WORD if foreign else "email"
    return client.post("/v1/search", json=search_body(query=query, limit=100), headers=h)


def _forget(client: httpx.Client, h: dict[str, str], c: Case, foreign: bool) -> httpx.Response:
    subject = c.foreign_subject if foreign else c.subject
    return client.post(f"/v1/subjects/{subject}/forget", headers=h)


def _events(client: httpx.Client, h: dict[str, str], c: Case, foreign: bool) -> httpx.Response:
    return client.get("/v1/events", params={"limit": 1000}, headers=h)


# endpoint → (its scope, the call, its success status)
ENDPOINTS: dict[str, tuple[str, Call, int]] = {
    "PUT /v1/memories/{id}": ("memory:write", _put, 200),
    "POST /v1/memories": ("memory:write", _post, 201),
    "GET /v1/memories/{id}": ("memory:read", _get, 200),
    "DELETE /v1/memories/{id}": ("subject:forget", _erase, 200),
    "GET /v1/memories": ("memory:read", _browse, 200),
    "GET /v1/memories/{id}/history": ("audit:read", _history, 200),
    "POST /v1/memories/{id}/promote": ("memory:review", _promote, 200),
    "POST /v1/memories/{id}/reject": ("memory:review", _reject, 200),
    "GET /v1/quarantine": ("memory:review", _quarantine, 200),
    "POST /v1/search": ("memory:read", _search, 200),
    "POST /v1/subjects/{subject_id}/forget": ("subject:forget", _forget, 200),
    "GET /v1/events": ("audit:read", _events, 200),
}
ITEM_ENDPOINTS = {name for name in ENDPOINTS if "{id}" in name}


def expected_status(endpoint: str, scope: str, foreign: bool) -> int:
    """The matrix: 422 for a body naming a tenant, 403 without the scope, foreign as unknown."""
    required, _, success = ENDPOINTS[endpoint]
    if foreign and endpoint == "POST /v1/memories":
        return 422  # the body names a tenant: refused before anything else is checked
    if scope != required:
        return 403
    if foreign and endpoint == "PUT /v1/memories/{id}":
        return 409  # ids are per tenant: replacing an id acme never wrote is at version 0
    if foreign and endpoint in ITEM_ENDPOINTS:
        return 404
    return success


@pytest.mark.parametrize("foreign", [False, True], ids=["own", "foreign"])
@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_permission_matrix(world: World, endpoint: str, scope: str, foreign: bool) -> None:
    """Each endpoint answers each scope and tenant as the matrix says, and never leaks."""
    case = world.case()
    _, call, _ = ENDPOINTS[endpoint]
    response = call(world.api.client, world.keys[scope], case, foreign)
    assert response.status_code == expected_status(endpoint, scope, foreign), response.text
    # As a JSON string: a bare substring also matches inside a random event id.
    named = f'"{case.foreign}"' in response.text
    assert not named or (endpoint in ITEM_ENDPOINTS and foreign)
    assert FOREIGN_WORD not in response.text
    assert "globex" not in response.text or endpoint == "POST /v1/memories"
    foreign_item = world.api.client.get(
        f"/v1/memories/{case.foreign}", headers=world.writers["globex"]
    ).json()
    assert (foreign_item["status"], foreign_item["version"]) == ("quarantined", 1)


def test_a_foreign_item_answers_exactly_like_an_unknown_id(world: World) -> None:
    """For every item endpoint, another tenant's id gets the same answer as an unknown id."""
    case = world.case()
    unknown = Case(case.n, "never-written", "never-written", case.subject, "never-written", "x")
    for endpoint in sorted(ITEM_ENDPOINTS):
        required, call, _ = ENDPOINTS[endpoint]
        key = world.keys[required]
        foreign = call(world.api.client, key, case, True)
        missing = call(world.api.client, key, unknown, True)
        assert foreign.status_code == missing.status_code, endpoint
        assert foreign.json()["type"] == missing.json()["type"], endpoint


def test_an_agent_bound_key_cannot_act_for_another_agent(world: World) -> None:
    """A key bound to support-bot cannot write or search as sales-bot, nor see its items."""
    api = world.api
    bot = api.key("memory:write,memory:read", agents="support-bot", trust="untrusted")
    write = api.client.post(
        "/v1/memories", json=write_body(agent_id="sales-bot", trust="untrusted"), headers=bot
    )
    assert write.status_code == 403
    search = api.client.post("/v1/search", json=search_body(agent_id="sales-bot"), headers=bot)
    assert search.status_code == 403
    sales_item = api.write(
        world.writers["acme"], f"sales-{next(world.counter)}", agent_id="sales-bot"
    )
    assert api.client.get(f"/v1/memories/{sales_item['id']}", headers=bot).status_code == 404
    own = api.client.post("/v1/memories", json=write_body(trust="untrusted"), headers=bot)
    assert own.status_code == 201


def test_an_untrusted_only_key_cannot_write_trusted(world: World) -> None:
    """A key whose maximum trust is untrusted gets 403 for a trusted write; untrusted works."""
    api = world.api
    key = api.key("memory:write", trust="untrusted")
    trusted = api.client.post("/v1/memories", json=write_body(trust="trusted"), headers=key)
    assert trusted.status_code == 403
    assert trusted.headers["content-type"] == "application/problem+json"
    untrusted = api.client.post("/v1/memories", json=write_body(trust="untrusted"), headers=key)
    assert untrusted.status_code == 201
    assert untrusted.json()["status"] == "quarantined"
