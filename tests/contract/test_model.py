"""A stateful property test: the service against a small reference model of SPEC §3, §7.

Hypothesis drives random sequences of writes, rewrites, corrections, reviews, forgets,
single-item erases, expiry and retention through the real service on each backend, and a
plain-Python model of the rules predicts every outcome. After every step the items must
agree with the model (status, version, whether they hold content); every search must
return exactly the active, unexpired, in-scope items the model expects — never another
tenant's, agent's or purpose's item, never a non-active one; every browse, page by page,
exactly the items and order the model expects, with the status each has at that moment.
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

from governed_memory.core.model import MemoryItem, Principal
from governed_memory.core.policy import DAY, RetentionPolicy
from governed_memory.core.values import Kind, Scope, Status, Trust
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
from governed_memory.results import EraseResult, WriteResult
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
#: Retention windows short enough for the steps of time the rules take (hours to days);
#: only working notes expire within a run, so theirs is the window the steps reach.
WINDOWS = {
    ("fact", Status.EXPIRED): timedelta(0),
    ("working_note", Status.EXPIRED): timedelta(days=1),
    ("fact", Status.REJECTED): timedelta(days=2),
    ("working_note", Status.REJECTED): timedelta(days=2),
    ("fact", Status.SUPERSEDED): timedelta(days=0.5),
    ("working_note", Status.SUPERSEDED): timedelta(days=0.5),
}
RETENTION = RetentionPolicy.from_seconds(
    {Status.EXPIRED: 0, Status.REJECTED: 2 * DAY, Status.SUPERSEDED: DAY // 2},
    {(Kind.WORKING_NOTE, Status.EXPIRED): DAY},
)


@dataclasses.dataclass
class Expected:
    """The model's view of one item."""

    agent: str
    purpose: str
    subject: str
    kind: str
    words: frozenset[str]
    status: Status
    version: int
    writer: str
    writers: frozenset[str]
    expires_at: datetime
    updated_at: datetime
    supersedes: str | None = None
    superseded_by: str | None = None
    has_content: bool = True
    untrusted: bool = False  # nobody vouched for it: its content is for reviewers only

    def changed(self, now: datetime, status: Status | None = None) -> None:
        """One more version, changed ``now`` (to ``status``, if given)."""
        self.version += 1
        self.updated_at = now
        if status is not None:
            self.status = status

    def status_at(self, now: datetime) -> Status:
        """The status a read shows at ``now``: expired once past its expiry."""
        return Status.EXPIRED if self.status in LIVE and self.expires_at <= now else self.status


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


def eraser(tenant: str) -> Principal:
    return principal(tenant, "dpo", scopes={Scope.SUBJECT_FORGET, Scope.MEMORY_READ})


class Lifecycle(RuleBasedStateMachine):
    """The service and the model, stepped together."""

    backend = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="gmem-model-"))
        self._stores: Iterator[Store] = make_store(self.backend, self.tmp)
        store = next(self._stores)
        self.clock = FakeClock()
        self.service = MemoryService(
            store, Keyring(b"k" * 32), clock=self.clock, retention=RETENTION
        )
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
            and target.status_at(self.clock.now()) is Status.ACTIVE
            and (target.agent, target.purpose) == (item.agent, item.purpose)
        ):
            target.changed(self.clock.now(), Status.SUPERSEDED)
            target.superseded_by = memory_id

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
        now = self.clock.now()
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
        elif current is not None and current.status_at(now) not in LIVE:
            outcome = InvalidTransition
        elif current is not None and current.status_at(now) is Status.ACTIVE and not trusted:
            outcome = PermissionDenied  # an untrusted rewrite cannot displace an active item
        elif current is None and supersedes is not None:
            target = self.model.get((tenant, supersedes))
            if (
                target is None
                or (target.agent, target.purpose) != (agent_id, purpose)
                or target.status_at(now) is not Status.ACTIVE
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
            kind=kind,
            words=words,
            status=status,
            untrusted=not trusted,
            version=version + 1,
            writer=who.principal_id,
            writers=frozenset({who.principal_id}) | (current.writers if current else set()),
            expires_at=self.clock.now() + KINDS[kind],
            updated_at=self.clock.now(),
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
        elif item.status_at(self.clock.now()) is not Status.QUARANTINED:
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
        item.changed(self.clock.now(), Status.ACTIVE if promote else Status.REJECTED)
        item.untrusted = item.untrusted and not promote
        if promote:
            self._supersede(tenant, memory_id, item)
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
            item.changed(self.clock.now(), Status.DELETED)
            item.has_content = False
        self.keys.discard((tenant, subject))

    @rule(
        tenant=st.sampled_from(TENANTS),
        memory_id=st.sampled_from(IDS),
        by_writer=st.booleans(),
        keyed=st.booleans(),
    )
    def erase(self, tenant: str, memory_id: str, by_writer: bool, keyed: bool) -> None:
        """Erase one memory: never by one of its writers; a deleted one stays as it is."""
        item = self.model.get((tenant, memory_id))
        who = writer(tenant) if by_writer else eraser(tenant)
        head = self.service.store.head()
        if item is None or who.principal_id in item.writers:
            with pytest.raises(NotFound if item is None else SelfPromotion):
                self.service.erase(who, memory_id)
            return
        key = self._key() if keyed else None
        result = self.service.erase(who, memory_id, idempotency_key=key)
        if key is not None:
            self.keyed.append(
                (
                    lambda: self.service.erase(who, memory_id, idempotency_key=key),
                    result,
                    (tenant, memory_id),
                )
            )
        if item.status is Status.DELETED:
            assert self.service.store.head() == head
            assert result.position is not None and result.position <= head
            return
        assert result.position == head + 1
        item.changed(self.clock.now(), Status.DELETED)
        item.has_content = False

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
        if about is not None and not self.model[about].has_content:
            if isinstance(first, WriteResult):
                first = dataclasses.replace(
                    first, item=dataclasses.replace(first.item, content=None)
                )
            elif isinstance(first, MemoryItem):
                first = dataclasses.replace(first, content=None)
            else:
                assert isinstance(first, EraseResult)
        assert result == first

    @rule(days=st.sampled_from([0.5, 2]))
    def time_passes_and_the_worker_sweeps(self, days: float) -> None:
        now = self.clock.advance(days=days)
        due = [i for i in self.model.values() if i.status in LIVE and i.expires_at <= now]
        assert self.service.expire_due() == len(due)
        for item in due:
            item.changed(now, Status.EXPIRED)
        self._retention()

    @rule(hours=st.sampled_from([6, 30]))
    def time_passes_before_the_worker_runs(self, hours: int) -> None:
        """Items may now be past their expiry, unrecorded: every rule and read must treat
        them as expired already."""
        self.clock.advance(hours=hours)

    @rule()
    def the_worker_sweeps_retention_only(self) -> None:
        self._retention()

    def _retention(self) -> None:
        """Content past its window is destroyed; the status stays."""
        now = self.clock.now()
        due = [
            item
            for item in self.model.values()
            if item.has_content
            and (item.kind, item.status) in WINDOWS
            and item.updated_at <= now - WINDOWS[(item.kind, item.status)]
        ]
        report = self.service.apply_retention()
        assert (report.destroyed, report.legacy) == (len(due), 0)
        for item in due:
            item.changed(now)
            item.has_content = False

    @rule(
        tenant=st.sampled_from(TENANTS),
        agent_id=st.none() | st.sampled_from(AGENTS),
        via_agent_key=st.booleans(),
        limit=st.integers(min_value=1, max_value=3),
    )
    def browse(self, tenant: str, agent_id: str | None, via_agent_key: bool, limit: int) -> None:
        """Every page of a browse together, unfiltered and for each status: exactly the
        model's items, in (updated_at, id) order, each with the status it has now; a key
        bound to an agent sees only its agent's."""
        bound = agent_id or AGENTS[0]
        who = agent(tenant, bound) if via_agent_key else writer(tenant)
        now = self.clock.now()
        for status in [None, *Status]:
            expected = sorted(
                (item.updated_at, memory_id)
                for (t, memory_id), item in self.model.items()
                if t == tenant
                and (agent_id is None or item.agent == agent_id)
                and (not via_agent_key or item.agent == bound)
                and (status is None or item.status_at(now) is status)
            )
            seen = self._pages(who, agent_id, status, limit)
            assert [item.id for item in seen] == [memory_id for _, memory_id in expected]
            for item in seen:
                model = self.model[(tenant, item.id)]
                assert item.status is model.status_at(now)
                readable = not model.untrusted or who.has(Scope.MEMORY_REVIEW)
                assert (item.content is not None) == (model.has_content and readable)

    def _pages(
        self, who: Principal, agent_id: str | None, status: Status | None, limit: int
    ) -> list[MemoryItem]:
        """Every item of a browse, page after page."""
        seen: list[MemoryItem] = []
        cursor = None
        while True:
            page = self.service.browse(
                who, agent_id=agent_id, status=status, limit=limit, cursor=cursor
            )
            assert len(page.items) <= limit
            seen += page.items
            cursor = page.next_cursor
            if cursor is None:
                return seen

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
            assert (state.content is not None) == item.has_content


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
