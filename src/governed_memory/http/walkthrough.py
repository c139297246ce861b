"""The reference walkthrough over HTTP: the lifecycle as a client sees it (``gmem demo``).

A trusted write is active; an untrusted one waits in quarantine; a search finds 1; a
reviewer promotes the waiting item; a search finds 2; forgetting the subject reports 2
deleted; a search finds 0; health answers 200. Each step is checked, so the walkthrough
doubles as a smoke test of a running service.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from governed_memory.apikeys import create_api_key, parse_scopes
from governed_memory.core.values import Trust
from governed_memory.ports import ApiKeys

AGENT = "support-bot"
PURPOSE = "support"
QUERY = "contact email"


@dataclass(frozen=True, slots=True)
class WalkthroughKeys:
    """The three credentials the walkthrough uses, all of one tenant."""

    operator: str  # memory:write, memory:read, subject:forget; may write trusted
    agent: str  # memory:write, memory:read; untrusted; bound to support-bot
    reviewer: str  # memory:review


@dataclass(slots=True)
class WalkthroughResult:
    """What each step saw, for callers that check it."""

    subject_id: str
    trusted: dict[str, Any] = field(default_factory=dict)
    untrusted: dict[str, Any] = field(default_factory=dict)
    found: list[int] = field(default_factory=list)
    forgotten: int = -1
    health: int = 0


def demo_keys(api_keys: ApiKeys, tenant: str, now: datetime) -> WalkthroughKeys:
    """Create the walkthrough's three keys directly in the store of ``api_keys``."""

    def key(scopes: list[str], trust: Trust, agents: frozenset[str] | None, name: str) -> str:
        record, token = create_api_key(tenant, agents, parse_scopes(scopes), trust, now, name)
        api_keys.add_api_key(record)
        return token

    return WalkthroughKeys(
        operator=key(
            ["memory:write", "memory:read", "subject:forget"], Trust.TRUSTED, None, "operator"
        ),
        agent=key(["memory:write", "memory:read"], Trust.UNTRUSTED, frozenset({AGENT}), "agent"),
        reviewer=key(["memory:review"], Trust.UNTRUSTED, None, "reviewer"),
    )


class WalkthroughFailed(Exception):
    """A step did not see what the lifecycle promises."""


def _call(response: httpx.Response, expected: int) -> dict[str, Any]:
    if response.status_code != expected:
        raise WalkthroughFailed(
            f"{response.request.method} {response.request.url.path} answered "
            f"{response.status_code}, expected {expected}"
        )
    body: dict[str, Any] = response.json()
    return body


class _Steps:
    """The requests of the walkthrough, each checked for the status it must answer."""

    def __init__(self, client: httpx.Client, keys: WalkthroughKeys, result: WalkthroughResult):
        self.client = client
        self.keys = keys
        self.result = result

    def write(self, token: str, content: str, source: str, trust: str) -> dict[str, Any]:
        body = {
            "agent_id": AGENT,
            "subject_id": self.result.subject_id,
            "purpose": PURPOSE,
            "kind": "preference",
            "content": content,
            "provenance": {"source": source, "ref": f"{source}-1"},
            "trust": trust,
        }
        return _call(self.client.post("/v1/memories", json=body, headers=_auth(token)), 201)

    def search(self) -> int:
        body = {
            "agent_id": AGENT,
            "purpose": PURPOSE,
            "query": QUERY,
            "subject_id": self.result.subject_id,
        }
        found = _call(
            self.client.post("/v1/search", json=body, headers=_auth(self.keys.agent)), 200
        )
        self.result.found.append(len(found["items"]))
        return len(found["items"])

    def promote(self, item: dict[str, Any]) -> dict[str, Any]:
        path, version = f"/v1/memories/{item['id']}/promote", item["version"]
        answer = self.client.post(
            path, json={"expected_version": version}, headers=_auth(self.keys.reviewer)
        )
        return _call(answer, 200)

    def forget(self) -> int:
        path = f"/v1/subjects/{self.result.subject_id}/forget"
        forgotten = _call(self.client.post(path, headers=_auth(self.keys.operator)), 200)
        affected: int = forgotten["affected"]
        return affected


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def walkthrough(
    client: httpx.Client,
    keys: WalkthroughKeys,
    say: Callable[[str], None] = print,
    subject_id: str | None = None,
) -> WalkthroughResult:
    """Run the walkthrough against the service ``client`` points at."""
    result = WalkthroughResult(subject_id or "customer-" + secrets.token_hex(4))
    steps = _Steps(client, keys, result)
    result.trusted = steps.write(
        keys.operator, "Prefers to be contacted by email, never by phone.", "crm", "trusted"
    )
    say(f"1. trusted write      -> {result.trusted['id']} is {result.trusted['status']}")
    result.untrusted = steps.write(
        keys.agent, "Said in chat: email contact works best on weekdays.", "chat", "untrusted"
    )
    say(f"2. untrusted write    -> {result.untrusted['id']} is {result.untrusted['status']}")
    say(f"3. search             -> {steps.search()} result(s)")
    promoted = steps.promote(result.untrusted)
    say(f"4. promote            -> {promoted['id']} is {promoted['status']}, {promoted['trust']}")
    say(f"5. search             -> {steps.search()} result(s)")
    result.forgotten = steps.forget()
    say(f"6. forget subject     -> {result.forgotten} item(s) deleted, key destroyed")
    say(f"7. search             -> {steps.search()} result(s)")
    result.health = client.get("/health").status_code
    say(f"8. health             -> {result.health}")
    seen = (result.trusted["status"], result.untrusted["status"], promoted["trust"])
    expected = ("active", "quarantined", "verified")
    if seen != expected or result.found != [1, 2, 0] or result.forgotten != 2:
        raise WalkthroughFailed("the walkthrough did not see the lifecycle it promises")
    if result.health != 200:
        raise WalkthroughFailed("the walkthrough did not see the lifecycle it promises")
    return result


__all__ = ["WalkthroughFailed", "WalkthroughKeys", "WalkthroughResult", "demo_keys", "walkthrough"]
