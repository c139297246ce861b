"""Fixtures of the integration tests: governed memory as a LangGraph store sees it.

Each test runs on three deployments: a service in process over SQLite, the same over
PostgreSQL (``GMEM_TEST_POSTGRES_DSN``; under ``CI=true`` a missing server fails), and
the HTTP API through the client (over SQLite). Three principals act, each through its own
store: ``app`` writes trusted memories, ``agent`` writes untrusted ones (they wait in
quarantine), ``operator`` reviews and erases (nobody erases or promotes what their own
principal wrote).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from governed_memory.core.model import MemoryItem, Principal
from governed_memory.core.values import Scope, Trust
from governed_memory.crypto import Keyring
from governed_memory.integrations.langgraph import GovernedStore, ItemFields, NamespaceMap
from governed_memory.integrations.langgraph.mapping import KeyIds
from governed_memory.integrations.langgraph.store import tenant_secret
from governed_memory.service import MemoryService
from tests.conftest import make_store
from tests.support.api import Served, serve_for_clients
from tests.support.fakes import FakeClock

#: Who acts: scopes and trust of each role (principal and key are the role's name).
ROLES: dict[str, tuple[frozenset[Scope], Trust]] = {
    "app": (
        frozenset({Scope.MEMORY_READ, Scope.MEMORY_WRITE, Scope.SUBJECT_FORGET}),
        Trust.TRUSTED,
    ),
    "agent": (frozenset({Scope.MEMORY_READ, Scope.MEMORY_WRITE}), Trust.UNTRUSTED),
    "operator": (
        frozenset({Scope.MEMORY_READ, Scope.MEMORY_REVIEW, Scope.SUBJECT_FORGET, Scope.AUDIT_READ}),
        Trust.TRUSTED,
    ),
}
#: Each role writes the trust it may: the app trusted, the agent untrusted.
FIELDS = {role: ItemFields(trust=trust) for role, (_, trust) in ROLES.items()}
#: The ported LangGraph tests use namespaces of any shape: one scope holds them all.
ONE_SCOPE = NamespaceMap(agent_id="graph", purpose="langgraph", subject_id="everyone")

StoreFor = Callable[..., GovernedStore]


@dataclass
class Deployment:
    """Governed memory as the tests reach it: stores per role, and the review queue."""

    name: str
    store_for: StoreFor
    quarantined: Callable[[], list[MemoryItem]]
    promote: Callable[[MemoryItem], None]
    reject: Callable[[MemoryItem], None]
    #: The operator reads a memory by id, and the types of the events of its history.
    read: Callable[[str], MemoryItem]
    history: Callable[[str], list[str]]
    #: The key secret of the stores: the tenant's derived one in process, the test's over HTTP.
    key_secret: bytes
    #: The service's clock, where the test holds it (in process only).
    clock: FakeClock | None = None

    def store(
        self, role: str, namespaces: NamespaceMap = ONE_SCOPE, **options: Any
    ) -> GovernedStore:
        """A store acting as ``role``, writing the trust that role may."""
        options.setdefault("fields", FIELDS[role])
        return self.store_for(role, namespaces=namespaces, **options)

    def memory_id(
        self,
        namespace: tuple[str, ...],
        key: str,
        generation: int = 0,
        namespaces: NamespaceMap = ONE_SCOPE,
    ) -> str:
        """The id of a key's memory of that generation, where ``namespaces`` maps it."""
        ids = KeyIds.of(namespaces.scope(namespace), namespace, key, self.key_secret)
        return ids.id(generation)

    def promote_all(self) -> int:
        """The operator promotes every memory waiting in quarantine; how many."""
        waiting = self.quarantined()
        for memory in waiting:
            self.promote(memory)
        return len(waiting)


def in_process(name: str, service: MemoryService, clock: FakeClock | None) -> Deployment:
    principals = {
        role: Principal("acme", role, scopes, trust) for role, (scopes, trust) in ROLES.items()
    }
    operator = principals["operator"]

    def promote(memory: MemoryItem) -> None:
        service.promote(operator, memory.id, memory.version)

    def reject(memory: MemoryItem) -> None:
        service.reject(operator, memory.id, memory.version)

    return Deployment(
        name,
        lambda role, **options: GovernedStore.in_process(service, principals[role], **options),
        lambda: service.list_quarantine(operator, limit=500).items,
        promote,
        reject,
        lambda memory_id: service.get(operator, memory_id),
        lambda memory_id: [event.type for event in service.history(operator, memory_id)],
        tenant_secret(service, "acme"),
        clock,
    )


def over_http(served: Served) -> Deployment:
    tokens = {
        role: served.key(",".join(sorted(s.value for s in scopes)), trust=trust.value)
        for role, (scopes, trust) in ROLES.items()
    }
    clients = {role: served.client(token) for role, token in tokens.items()}
    operator = clients["operator"]
    key_secret = secrets.token_bytes(32)

    def promote(memory: MemoryItem) -> None:
        operator.promote(memory.id, memory.version)

    def reject(memory: MemoryItem) -> None:
        operator.reject(memory.id, memory.version)

    return Deployment(
        "http",
        lambda role, **options: GovernedStore.over_http(
            clients[role], **({"key_secret": key_secret} | options)
        ),
        lambda: operator.list_quarantine(limit=500).items,
        promote,
        reject,
        operator.get,
        lambda memory_id: [event.type for event in operator.history(memory_id)],
        key_secret,
    )


@pytest.fixture(scope="module")
def shared_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One HTTP app per module; each test keeps to a tenant of its own."""
    with ExitStack() as stack:
        yield serve_for_clients(tmp_path_factory.mktemp("app"), stack)


@pytest.fixture(params=["sqlite", "postgres", "http"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    """Governed memory on each deployment in turn."""
    if request.param == "http":
        shared: Served = request.getfixturevalue("shared_app")
        with ExitStack() as stack:
            tenant = "t-" + secrets.token_hex(6)
            yield over_http(replace(shared, stack=stack, tenant=tenant, principals={}))
        return
    for store in make_store(request.param, tmp_path):
        service = MemoryService(store, Keyring(secrets.token_bytes(32)))
        yield in_process(request.param, service, None)


@pytest.fixture(params=["sqlite", "postgres"])
def held_clock(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    """Governed memory in process on each SQL backend, its clock in the test's hand."""
    clock = FakeClock(datetime.now(UTC))
    for store in make_store(request.param, tmp_path):
        service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=clock)
        yield in_process(request.param, service, clock)


@pytest.fixture(params=["sqlite", "postgres"])
def bare_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryService]:
    """A service in process on each SQL backend, for tests that bring their own principals."""
    for store in make_store(request.param, tmp_path):
        yield MemoryService(store, Keyring(secrets.token_bytes(32)))


@pytest.fixture
def store(deployment: Deployment) -> GovernedStore:
    """The app's store: trusted writes, in one scope."""
    return deployment.store("app")


@pytest.fixture
def deleter(deployment: Deployment) -> GovernedStore:
    """The operator's store: it erases what the app wrote (four eyes)."""
    return deployment.store("operator")
