"""Fakes for tests: a clock that moves only when told, principals, and the one valid write
(as a service body, an HTTP body, client arguments) that tests vary by overrides."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from governed_memory.core.events import StoredEvent
from governed_memory.core.model import Principal
from governed_memory.core.values import Scope, Trust
from governed_memory.ports import Store
from governed_memory.records import Batch

START = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


class FakeClock:
    """A clock that stands still until a test advances it."""

    def __init__(self, start: datetime = START) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, **delta: float) -> datetime:
        with self._lock:
            self._now += timedelta(**delta)
            return self._now


def before_next_commit(store: Store, meanwhile: Callable[[], object]) -> list[bool]:
    """Run ``meanwhile`` just before ``store`` commits its next batch, as another thread or
    instance would between a command's reads and its commit. The list returned gets one
    entry once that has happened."""
    commit = store.commit
    done: list[bool] = []

    def first_meanwhile(batch: Batch) -> list[StoredEvent]:
        if not done:
            done.append(True)
            store.commit = commit  # type: ignore[method-assign]
            meanwhile()
        return commit(batch)

    store.commit = first_meanwhile  # type: ignore[method-assign]
    return done


def principal(
    tenant: str = "acme",
    name: str = "writer",
    *,
    scopes: set[Scope] | frozenset[Scope] | None = None,
    trust: Trust = Trust.TRUSTED,
    agents: set[str] | None = None,
) -> Principal:
    """A principal with every memory scope unless told otherwise."""
    return Principal(
        tenant_id=tenant,
        principal_id=name,
        scopes=frozenset(scopes if scopes is not None else set(Scope)),
        max_trust=trust,
        agents=None if agents is None else frozenset(agents),
    )


def agent_key(tenant: str = "acme", agent: str = "support-bot") -> Principal:
    """An agent's credential: write and read, untrusted, bound to one agent."""
    return principal(
        tenant,
        f"agent:{agent}",
        scopes={Scope.MEMORY_WRITE, Scope.MEMORY_READ},
        trust=Trust.UNTRUSTED,
        agents={agent},
    )


def reviewer(tenant: str = "acme", name: str = "reviewer") -> Principal:
    """A reviewer's credential: review and read."""
    return principal(tenant, name, scopes={Scope.MEMORY_REVIEW, Scope.MEMORY_READ})


def body(**overrides: Any) -> dict[str, Any]:
    """A valid write body (trusted fact about customer-1 for support-bot), with overrides."""
    data: dict[str, Any] = {
        "agent_id": "support-bot",
        "subject_id": "customer-1",
        "purpose": "support",
        "kind": "fact",
        "content": "The customer prefers email over phone calls.",
        "provenance": {"source": "crm", "ref": "ticket-1"},
        "trust": "trusted",
        "confidence": 0.9,
        "expected_version": 0,
    }
    data.update(overrides)
    return data


def write_body(**overrides: Any) -> dict[str, Any]:
    """:func:`body` as JSON for the HTTP API: an override of ``None`` leaves a member out."""
    return {name: value for name, value in body(**overrides).items() if value is not None}


def fact(**overrides: Any) -> dict[str, Any]:
    """:func:`body` as keyword arguments of ``Client.create`` (no ``expected_version``)."""
    fields = body(**overrides)
    fields.pop("expected_version")
    return fields


def query(text: str = "email", **overrides: Any) -> dict[str, Any]:
    """A valid search body for support-bot/support, with overrides."""
    data: dict[str, Any] = {"agent_id": "support-bot", "purpose": "support", "query": text}
    data.update(overrides)
    return data
