"""A stateful property test: the service against a small reference model of SPEC §3.

Hypothesis drives random sequences of writes, rewrites, corrections, reviews, forgets and
expiry through the real service on each backend, and a plain-Python model of the rules
predicts every outcome. After every step the items must agree with the model, and every
search must return exactly the active, unexpired, in-scope items the model expects —
never another tenant's, agent's or purpose's item, never a non-active one.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from governed_memory.core.model import Principal
from governed_memory.core.values import Scope, Status, Trust
from governed_memory.crypto import Keyring
from governed_memory.errors import (
    GovernedMemoryError,
    InvalidTransition,
    NotFound,
    PermissionDenied,
    SelfPromotion,
    ValidationError,
    VersionConflict,
)
from governed_memory.ports import Store
from governed_memory.results import WriteResult
from governed_memory.service import MemoryService
from tests.conftest import make_store, postgres_dsn
from tests.support.fakes import FakeClock, principal

TENANTS = ["acme", "globex"]
AGENTS = ["a1", "a2"]
PURPOSES = ["p1", "p2"]
SUBJECTS = ["s1", "s2"]
IDS = ["m1", "m2", "m3", "m4"]
WORDS = ["alpha", "beta", "gamma", "delta"]
KINDS = {"working_note": timedelta(days=1), "fact": timedelta(days=90)}
LIVE = {Status.ACTIVE, Status.QUARANTINED}


@dataclasses.dataclass
class Expected:
    """The model's view of one item."""

    agent: str
    purpose: str
    subject: str
    words: frozenset[str]
    status: Status
    version: int
    writer: str
    expires_at: datetime
    supersedes: str | None = None
    superseded_by: str | None = None


def writer(tenant: str) -> Principal:
    return principal(tenant, "writer", scopes=set(Scope), trust=Trust.TRUSTED)


def agent(tenant: str, agent_id: str) -> Principal:
    return principal(
        tenant,
        f"agent-{agent_id}",
        scopes={Scope.MEMORY_WRITE, Scope.MEMORY_READ},
        trust=Trust.UNTRUSTED,
        agents={agent_id},
    )


def reviewer(tenant: str) -> Principal:
    return principal(tenant, "reviewer", scopes={Scope.MEMORY_REVIEW, Scope.MEMORY_READ})


class Lifecycle(RuleBasedStateMachine):
    """The service and the model, stepped together."""

    backend = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="gmem-model-"))
        self._stores: Iterator[Store] = make_store(self.backend, self.tmp)
        store = next(self._stores)
        self.clock = FakeClock()
        self.service = MemoryService(store, Keyring(b"k" * 32), clock=self.clock)
        self.model: dict[tuple[str, str], Expected] = {}
        self.keys: set[tuple[str, str]] = set()
        # Acknowledged requests sent with an idempotency key: how to send them again, the
        # first answer, and the item it is about (to tell whether it was forgotten since).
        self.keyed: list[tuple[Callable[[], Any], Any, tuple[str, str] | None]] = []

    def teardown(self) -> None:
        try:
            report = self.service.verify_replay()
            assert report.ok, report.differences
        finally:
            for _ in self._stores:  # resumes the generator: closes and drops the store
                pass
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the model's rules ----------------------------------------------------------------

    def _supersede(self, tenant: str, memory_id: str, item: Expected) -> None:
        if item.supersedes is None:
            return
        target = self.model.get((tenant, item.supersedes))
        if (
            target is not None
            and target.status is Status.ACTIVE
            and (target.agent, target.purpose) == (item.agent, item.purpose)
        ):
            target.status = Status.SUPERSEDED
            target.superseded_by = memory_id
            target.version += 1

    @rule(
        tenant=st.sampled_from(TENANTS),
        agent_id=st.sampled_from(AGENTS),
        purpose=st.sampled_from(PURPOSES),
        subject=st.sampled_from(SUBJECTS),
        memory_id=st.sampled_from(IDS),
        trusted=st.booleans(),
        via_agent_key=st.booleans(),
        words=st.frozensets(st.sampled_from(WORDS), min_size=1, max_size=3),
        kind=st.sampled_from(sorted(KINDS)),
        stale=st.booleans(),
        supersedes=st.none() | st.sampled_from(IDS),
        keyed=st.booleans(),
    )
    def write(
        self,
        tenant: str,
        agent_id: str,
        purpose: str,
        subject: str,
        memory_id: str,
        trusted: bool,
        via_agent_key: bool,
        words: frozenset[str],
        kind: str,
        stale: bool,
        supersedes: str | None,
        keyed: bool,
    ) -> None:
        current = self.model.get((tenant, memory_id))
        if current is not None:  # a rewrite keeps agent, purpose and subject
            agent_id, purpose, subject, supersedes = (
                current.agent,
                current.purpose,
                current.subject,
                None,
            )
        who = agent(tenant, agent_id) if via_agent_key else writer(tenant)
        version = 0 if current is None else current.version
        expected_version = version + 3 if stale else version
        request = {
            "id": memory_id,
            "agent_id": agent_id,
            "subject_id": subject,
            "purpose": purpose,
            "kind": kind,
            "content": " ".join(sorted(words)),
            "provenance": {"source": "model", "ref": "step"},
            "trust": "trusted" if trusted else "untrusted",
            "expected_version": expected_version,
            "supersedes_id": supersedes,
        }
        outcome: type[GovernedMemoryError] | None = None
        if supersedes == memory_id:
            outcome = ValidationError
        elif trusted and via_agent_key:
            outcome = PermissionDenied  # trust above the key's cap
        elif expected_version != version:
            outcome = VersionConflict
        elif current is not None and current.status not in LIVE:
            outcome = InvalidTransition
        elif current is not None and current.status is Status.ACTIVE and not trusted:
            outcome = PermissionDenied  # an untrusted rewrite cannot displace an active item
        elif current is None and supersedes is not None:
            target = self.model.get((tenant, supersedes))
            if (
                target is None
                or (target.agent, target.purpose) != (agent_id, purpose)
                or target.status is not Status.ACTIVE
            ):
                outcome = ValidationError
        if outcome is not None:
            with pytest.raises(outcome):
                self.service.write(who, request)
            return
        key = self._key() if keyed else None
        result = self.service.write(who, request, idempotency_key=key)
        if key is not None:
            self.keyed.append(
                (
                    lambda: self.service.write(who, request, idempotency_key=key),
                    result,
                    (tenant, memory_id),
                )
            )
        status = Status.ACTIVE if trusted else Status.QUARANTINED
        item = Expected(
            agent=agent_id,
            purpose=purpose,
            subject=subject,
            words=words,
            status=status,
            version=version + 1,
            writer=who.principal_id,
            expires_at=self.clock.now() + KINDS[kind],
            supersedes=supersedes if current is None else current.supersedes,
            superseded_by=None if current is None else current.superseded_by,
        )
        self.model[(tenant, memory_id)] = item
        self.keys.add((tenant, subject))  # a key is minted only by a write that stands
        if status is Status.ACTIVE:
            self._supersede(tenant, memory_id, item)
        assert result.item.status is status
        assert result.item.version == item.version

    @rule(
        tenant=st.sampled_from(TENANTS),
        memory_id=st.sampled_from(IDS),
        by=st.sampled_from(["writer", "writer-second-key", "reviewer"]),
        stale=st.booleans(),
        promote=st.booleans(),
        keyed=st.booleans(),
    )
    def review(
        self,
        tenant: str,
        memory_id: str,
        by: str,
        stale: bool,
        promote: bool,
        keyed: bool,
    ) -> None:
        item = self.model.get((tenant, memory_id))
        who = writer(tenant) if by == "writer" else reviewer(tenant)
        if by == "writer-second-key":  # one person, another key: still the writer
            who = dataclasses.replace(writer(tenant), credential_id="key:second")
        version = 0 if item is None else item.version
        expected_version = version + 1 if stale else version
        outcome: type[GovernedMemoryError] | None = None
        if item is None:
            outcome = NotFound
        elif expected_version != version:
            outcome = VersionConflict
        elif item.status is not Status.QUARANTINED:
            outcome = InvalidTransition
        elif item.writer == who.principal_id:
            outcome = SelfPromotion  # four eyes: neither promote nor reject your own
        call = self.service.promote if promote else self.service.reject
        if outcome is not None:
            with pytest.raises(outcome):
                call(who, memory_id, expected_version)
            return
        assert item is not None
        key = self._key() if keyed else None
        result = call(who, memory_id, expected_version, idempotency_key=key)
        if key is not None:
            self.keyed.append(
                (
                    lambda: call(who, memory_id, expected_version, idempotency_key=key),
                    result,
                    (tenant, memory_id),
                )
            )
        item.version += 1
        if promote:
            item.status = Status.ACTIVE
            self._supersede(tenant, memory_id, item)
        else:
            item.status = Status.REJECTED
        assert result.status is item.status

    @rule(tenant=st.sampled_from(TENANTS), subject=st.sampled_from(SUBJECTS), keyed=st.booleans())
    def forget(self, tenant: str, subject: str, keyed: bool) -> None:
        doomed = [
            item
            for (t, _), item in self.model.items()
            if t == tenant and item.subject == subject and item.status is not Status.DELETED
        ]
        head = self.service.store.head()
        key = self._key() if keyed else None
        result = self.service.forget_subject(writer(tenant), subject, idempotency_key=key)
        if key is not None:
            self.keyed.append(
                (
                    lambda: self.service.forget_subject(
                        writer(tenant), subject, idempotency_key=key
                    ),
                    result,
                    None,
                )
            )
        assert result.affected == len(doomed)
        had_key = (tenant, subject) in self.keys
        assert self.service.store.head() == head + (1 if doomed or had_key else 0)
        for item in doomed:
            item.status = Status.DELETED
            item.version += 1
        self.keys.discard((tenant, subject))

    def _key(self) -> str:
        return f"key-{len(self.keyed)}-{self.service.store.head()}"

    @precondition(lambda self: bool(self.keyed))
    @rule(pick=st.integers(min_value=0))
    def retry_a_keyed_request(self, pick: int) -> None:
        """A retry of an acknowledged keyed request: the first answer, and no new event.

        Once the item's subject is forgotten its content is gone, so the replay shows the
        item as it was then, without content.
        """
        again, first, about = self.keyed[pick % len(self.keyed)]
        head = self.service.store.head()
        result = again()
        assert self.service.store.head() == head
        if about is not None and self.model[about].status is Status.DELETED:
            item = first.item if isinstance(first, WriteResult) else first
            forgotten = dataclasses.replace(item, content=None)
            first = dataclasses.replace(first, item=forgotten) if item is not first else forgotten
        assert result == first

    @rule(days=st.sampled_from([0.5, 2]))
    def time_passes_and_the_worker_sweeps(self, days: float) -> None:
        now = self.clock.advance(days=days)
        due = [i for i in self.model.values() if i.status in LIVE and i.expires_at <= now]
        assert self.service.expire_due() == len(due)
        for item in due:
            item.status = Status.EXPIRED
            item.version += 1

    @rule(
        tenant=st.sampled_from(TENANTS),
        agent_id=st.sampled_from(AGENTS),
        purpose=st.sampled_from(PURPOSES),
        word=st.sampled_from(WORDS),
        subject=st.none() | st.sampled_from(SUBJECTS),
        via_agent_key=st.booleans(),
    )
    def search(
        self,
        tenant: str,
        agent_id: str,
        purpose: str,
        word: str,
        subject: str | None,
        via_agent_key: bool,
    ) -> None:
        who = agent(tenant, agent_id) if via_agent_key else writer(tenant)
        found = self.service.search(
            who,
            {
                "agent_id": agent_id,
                "purpose": purpose,
                "query": word,
                "subject_id": subject,
                "limit": 100,
                "token_budget": 32_000,
            },
        )
        now = self.clock.now()
        expected = {
            memory_id
            for (t, memory_id), item in self.model.items()
            if t == tenant
            and (item.agent, item.purpose) == (agent_id, purpose)
            and item.status is Status.ACTIVE
            and item.expires_at > now
            and (subject is None or item.subject == subject)
            and word in item.words
        }
        for hit in found.items:
            assert hit.item.tenant_id == tenant
            assert (hit.item.agent_id, hit.item.purpose) == (agent_id, purpose)
            assert hit.item.status is Status.ACTIVE
            assert hit.item.expires_at > now
        assert {hit.item.id for hit in found.items} == expected

    @precondition(lambda self: bool(self.model))
    @invariant()
    def every_item_matches_the_model(self) -> None:
        for (tenant, memory_id), item in self.model.items():
            state = self.service.store.get(tenant, memory_id)
            assert state is not None
            assert (state.status, state.version) == (item.status, item.version)
            assert state.superseded_by == item.superseded_by


def run(backend: str, examples: int, steps: int) -> None:
    machine = type(f"Lifecycle_{backend}", (Lifecycle,), {"backend": backend})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_the_memory_store_never_diverges_from_the_model() -> None:
    """Random operation sequences on the reference store agree with the model."""
    run("memory", examples=60, steps=40)


def test_the_sqlite_store_never_diverges_from_the_model() -> None:
    """Random operation sequences on SQLite agree with the model."""
    run("sqlite", examples=25, steps=30)


def test_the_postgres_store_never_diverges_from_the_model() -> None:
    """Random operation sequences on PostgreSQL agree with the model."""
    postgres_dsn()
    run("postgres", examples=10, steps=25)
