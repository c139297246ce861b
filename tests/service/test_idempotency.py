"""The idempotency protocol: one key, one outcome, whatever the retries and their races."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable
from typing import Any

import pytest

from governed_memory.core.values import Scope
from governed_memory.crypto import Keyring
from governed_memory.errors import (
    IdempotencyKeyReused,
    NotFound,
    PermissionDenied,
    VersionConflict,
)
from governed_memory.records import Batch, IdempotencyRecord
from governed_memory.service import MemoryService
from governed_memory.service.idempotency import Idempotency, Keyed, fingerprint, record_of
from governed_memory.service.vault import Vault
from governed_memory.store.memory import MemoryStore
from tests.support.fakes import FakeClock, body, principal

WRITER = principal()


class Request:
    """A request that commits its key's record and answers with its own name."""

    def __init__(self, store: MemoryStore, key: str | None, digest: str, name: str) -> None:
        self.store, self.key, self.digest, self.name = store, key, digest, name
        self.runs = 0

    def keyed(self) -> Keyed[str] | None:
        """How the protocol knows this request: same digest, answered by the record."""
        if self.key is None:
            return None
        digest = self.digest
        return Keyed(
            "acme",
            "key:writer",
            self.key,
            lambda record: record.fingerprint == digest,
            lambda record: str(record.result["name"]),
        )

    def __call__(self) -> str:
        self.runs += 1
        record = record_of(self.keyed(), self.digest, {"name": self.name})
        self.store.commit(Batch("acme", [], [], record))
        return self.name


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def protocol(store: MemoryStore) -> Idempotency:
    return Idempotency(store, Vault(store, Keyring(secrets.token_bytes(32))))


def test_a_request_without_a_key_runs_every_time(store: MemoryStore, protocol: Idempotency) -> None:
    """No key, no memory of earlier attempts: each call runs the request."""
    request = Request(store, None, "d", "first")
    for _ in range(3):
        protocol.once(request.keyed(), request)
    assert request.runs == 3


def test_a_recorded_key_answers_again_without_running(
    store: MemoryStore, protocol: Idempotency
) -> None:
    """The second call with the same key and request gets the first answer; nothing runs."""
    first = Request(store, "k", "d", "first")
    again = Request(store, "k", "d", "again")
    assert protocol.once(first.keyed(), first) == "first"
    assert protocol.once(again.keyed(), again) == "first"
    assert again.runs == 0


def test_another_request_with_a_used_key_is_refused(
    store: MemoryStore, protocol: Idempotency
) -> None:
    """The same key for a different request is IdempotencyKeyReused, and nothing runs."""
    first = Request(store, "k", "one digest", "first")
    other = Request(store, "k", "another digest", "other")
    protocol.once(first.keyed(), first)
    with pytest.raises(IdempotencyKeyReused):
        protocol.once(other.keyed(), other)
    assert other.runs == 0


def test_a_retry_refused_for_a_taken_key_gets_its_twins_answer(
    store: MemoryStore, protocol: Idempotency
) -> None:
    """The twin committed the key after our look for it: the store refuses our batch,
    and the twin's answer is ours."""
    twin = Request(store, "k", "d", "twin")
    ours = Request(store, "k", "d", "ours")

    def attempt() -> str:
        twin()  # the twin commits after our look for the key's record
        return ours()  # our batch meets the twin's record

    assert protocol.once(ours.keyed(), attempt) == "twin"
    assert ours.runs == 1


def test_a_retry_that_conflicts_after_its_twin_committed_gets_the_twins_answer(
    store: MemoryStore, protocol: Idempotency
) -> None:
    """The twin changed the item under us: the conflict is really 'already done'."""
    twin = Request(store, "k", "d", "twin")

    def attempt() -> str:
        twin()
        raise VersionConflict("m1", 1, 2)

    assert protocol.once(Request(store, "k", "d", "ours").keyed(), attempt) == "twin"


def test_a_real_conflict_stays_a_conflict(store: MemoryStore, protocol: Idempotency) -> None:
    """Without a twin's record, a conflict is raised as it is."""

    def attempt() -> str:
        raise VersionConflict("m1", 1, 2)

    with pytest.raises(VersionConflict):
        protocol.once(Request(store, "k", "d", "ours").keyed(), attempt)


def test_keys_are_per_tenant(store: MemoryStore, protocol: Idempotency) -> None:
    """The same key in another tenant is another key."""
    record = IdempotencyRecord("globex", "key:writer", "k", "d", {"name": "g"})
    store.commit(Batch("globex", [], [], record))
    keyed = Request(store, "k", "d", "ours").keyed()
    assert keyed is not None
    assert protocol.replay(keyed) is None


def test_keys_are_per_credential(store: MemoryStore, protocol: Idempotency) -> None:
    """The same key string used by another credential of the tenant is another key."""
    record = IdempotencyRecord("acme", "key:squatter", "k", "other digest", {"name": "s"})
    store.commit(Batch("acme", [], [], record))
    ours = Request(store, "k", "d", "ours")
    assert protocol.once(ours.keyed(), ours) == "ours"
    assert ours.runs == 1


def test_the_fingerprint_ignores_key_order() -> None:
    """Two requests with the same fields in another order are the same request."""
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})


# -- the protocol inside the service -------------------------------------------------------


@pytest.fixture
def service(store: MemoryStore) -> MemoryService:
    return MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())


def test_a_replay_is_authorized_like_the_request(service: MemoryService) -> None:
    """A caller who may not write learns nothing from retrying someone's key."""
    service.write(WRITER, body(id="m1"), idempotency_key="k")
    reader = principal(name="reader", scopes={Scope.MEMORY_READ})
    with pytest.raises(PermissionDenied):
        service.write(reader, body(id="m1"), idempotency_key="k")


def test_another_credentials_key_shows_no_item_the_caller_cannot_see(
    service: MemoryService,
) -> None:
    """A reviewer of another agent sending a promotion's key gets not-found, not the item."""
    service.write(WRITER, body(id="m1", trust="untrusted"))
    own = principal(name="own", scopes={Scope.MEMORY_REVIEW}, agents={"support-bot"})
    other = principal(name="other", scopes={Scope.MEMORY_REVIEW}, agents={"sales-bot"})
    service.promote(own, "m1", 1, idempotency_key="k")
    with pytest.raises(NotFound):
        service.promote(other, "m1", 1, idempotency_key="k")


def test_another_credential_with_the_same_key_string_neither_replays_nor_is_blocked(
    service: MemoryService, store: MemoryStore
) -> None:
    """Two keys of one person send one key string with different writes: both are written."""
    first_key = dataclasses.replace(WRITER, credential_id="key:aaaa")
    second_key = dataclasses.replace(WRITER, credential_id="key:bbbb")
    first = service.write(first_key, body(id="m1"), idempotency_key="crm-sync-1")
    second = service.write(second_key, body(id="m2"), idempotency_key="crm-sync-1")
    assert (first.created, second.created) == (True, True)
    assert store.head() == 2
    again = service.write(second_key, body(id="m2"), idempotency_key="crm-sync-1")
    assert again == second
    assert store.head() == 2


def test_a_replay_answers_with_the_item_as_the_request_left_it(service: MemoryService) -> None:
    """A retried rejection returns the item at the version it produced, not as it is now."""
    service.write(WRITER, body(id="m1", trust="untrusted"))
    reviewer = principal(name="reviewer")
    rejected = service.reject(reviewer, "m1", 1, "Not verified.", idempotency_key="k")
    service.forget_subject(WRITER, "customer-1")
    again = service.reject(reviewer, "m1", 1, "Not verified.", idempotency_key="k")
    assert again == dataclasses.replace(rejected, content=None)
    assert service.get(WRITER, "m1").version == 3


def test_a_keyed_write_replayed_after_a_forget_answers_without_content(
    service: MemoryService, store: MemoryStore
) -> None:
    """The content hash died with the subject's key: the retry gets the first answer,
    without content, and writes nothing; a request for another subject is still refused."""
    first = service.write(WRITER, body(id="m1"), idempotency_key="k")
    service.forget_subject(WRITER, "customer-1")
    head = store.head()
    again = service.write(WRITER, body(id="m1"), idempotency_key="k")
    assert again == dataclasses.replace(first, item=dataclasses.replace(first.item, content=None))
    with pytest.raises(IdempotencyKeyReused):
        service.write(WRITER, body(id="m1", subject_id="customer-2"), idempotency_key="k")
    assert store.head() == head


class LateIdempotencyStore(MemoryStore):
    """Its next idempotency lookup misses, then lets a twin request commit."""

    def __init__(self) -> None:
        super().__init__()
        self.twin: Callable[[], object] | None = None

    def idempotency(self, tenant_id: str, credential: str, key: str) -> Any:
        found = super().idempotency(tenant_id, credential, key)
        twin, self.twin = self.twin, None
        if twin is not None:
            twin()
        return found


@pytest.mark.parametrize("memory_id", ["m1", None], ids=["own-id", "server-id"])
def test_a_first_write_that_loses_to_its_twin_gets_the_twins_answer(
    memory_id: str | None,
) -> None:
    """The twin minted the subject's key and committed first: the retry recognises the
    request under that key and answers like the twin, with one event in the log."""
    store = LateIdempotencyStore()
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
    request = body() if memory_id is None else body(id=memory_id)
    first: list[Any] = []
    store.twin = lambda: first.append(service.write(WRITER, request, idempotency_key="k"))
    second = service.write(WRITER, request, idempotency_key="k")
    assert second == first[0]
    assert store.head() == 1
