"""Identity as every backend must keep it (SPEC §5): keys belong to principals, four eyes
compare principals, idempotency records belong to credentials, and unreviewed content is
for reviewers."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from governed_memory.apikeys import create_api_key, split_token, verify
from governed_memory.core.values import Scope, Status, Trust
from governed_memory.errors import (
    AuthenticationError,
    IdempotencyKeyReused,
    ReadWouldWait,
    SelfPromotion,
)
from governed_memory.ports import Store
from governed_memory.records import ApiKey
from governed_memory.service import MemoryService
from tests.support.fakes import START, FakeClock, agent_key, body, principal, reviewer

ALICE = principal(name="alice")
#: Alice again, with another of her keys.
ALICE_LAPTOP = dataclasses.replace(
    principal(name="alice", scopes={Scope.MEMORY_REVIEW, Scope.MEMORY_READ}),
    credential_id="key:1aptop0000000000",
)
BOB = reviewer(name="bob")
READER = principal(name="rita", scopes={Scope.MEMORY_READ})


@pytest.mark.parametrize("review", ["promote", "reject"])
def test_no_key_of_the_writer_may_review_its_write(service: MemoryService, review: str) -> None:
    """Promoting or rejecting your own write is refused with any of your keys; another
    principal may."""
    service.write(ALICE, body(id="m1", trust="untrusted"))
    call = service.promote if review == "promote" else service.reject
    for own in (ALICE, ALICE_LAPTOP):
        with pytest.raises(SelfPromotion):
            call(own, "m1", 1)
    assert service.get(ALICE, "m1").status is Status.QUARANTINED
    reviewed = call(BOB, "m1", 1)
    assert reviewed.status is (Status.ACTIVE if review == "promote" else Status.REJECTED)


def test_history_names_the_principal_of_each_event(service: MemoryService) -> None:
    """Events name who acted (the principal), not the key they used."""
    service.write(ALICE, body(id="m1", trust="untrusted"))
    service.promote(BOB, "m1", 1)
    auditor = dataclasses.replace(ALICE, credential_id="key:0123456789abcdef")
    assert [(e.type, e.actor) for e in service.history(auditor, "m1")] == [
        ("memory.written", "alice"),
        ("memory.promoted", "bob"),
    ]


def test_a_key_string_used_first_by_another_credential_neither_replays_nor_blocks(
    service: MemoryService, store: Store
) -> None:
    """An agent of another bot uses crm-sync-1 first; the writer's request with the same
    string is written, and the writer's retry replays the writer's own answer."""
    squatter = agent_key(agent="sales-bot")
    service.write(
        squatter, body(agent_id="sales-bot", trust="untrusted"), idempotency_key="crm-sync-1"
    )
    writer = dataclasses.replace(ALICE, credential_id="key:c0ffee0000000000")
    first = service.write(writer, body(id="m1"), idempotency_key="crm-sync-1")
    assert first.created and first.item.status is Status.ACTIVE
    assert service.write(writer, body(id="m1"), idempotency_key="crm-sync-1") == first
    assert store.head() == 2


def test_a_key_used_for_a_forget_and_then_a_write_is_reused(
    service: MemoryService, store: Store
) -> None:
    """A write with the key of an earlier forget is IdempotencyKeyReused, not a crash, and
    writes nothing."""
    service.forget_subject(ALICE, "customer-1", idempotency_key="k")
    head = store.head()
    with pytest.raises(IdempotencyKeyReused):
        service.write(ALICE, body(), idempotency_key="k")
    assert store.head() == head


def test_a_key_used_for_a_promotion_is_reused_by_a_write_after_a_forget(
    service: MemoryService, store: Store
) -> None:
    """Promote with a key, forget the subject, then write with the key: IdempotencyKeyReused
    (the promotion's record is not a write's, whatever it names)."""
    service.write(principal(name="carol"), body(id="m1", trust="untrusted"))
    service.promote(ALICE, "m1", 1, idempotency_key="k")
    service.forget_subject(ALICE, "customer-1")
    head = store.head()
    for request in (body(), body(id="m1")):
        with pytest.raises(IdempotencyKeyReused):
            service.write(ALICE, request, idempotency_key="k")
    assert store.head() == head


def test_unreviewed_content_is_shown_to_reviewers_only(
    service: MemoryService, clock: FakeClock
) -> None:
    """A quarantined, rejected or expired-unreviewed item reads without content except to a
    memory:review key; reviewed or trusted content reads for every reader."""
    agent = agent_key()
    for memory_id in ("waiting", "refused", "lapsed", "admitted"):
        service.write(agent, body(id=memory_id, trust="untrusted", ttl_seconds=3600))
    service.reject(BOB, "refused", 1)
    service.promote(BOB, "admitted", 1)
    service.write(ALICE, body(id="trusted"))
    clock.advance(hours=2)
    service.expire_due()
    content = body()["content"]
    for memory_id in ("waiting", "refused", "lapsed"):
        assert service.get(READER, memory_id).content is None
        assert service.get(agent, memory_id).content is None  # the writer too: not reviewed
        assert service.get(BOB, memory_id).content == content
    assert service.get(READER, "admitted").content == content
    assert service.get(READER, "trusted").content == content


def test_a_library_caller_without_a_key_is_its_own_credential(
    service: MemoryService, store: Store
) -> None:
    """A Principal without credential_id keeps records under its principal id; another
    credential of the same principal has a namespace of its own."""
    service.write(ALICE, body(id="m1"), idempotency_key="k")
    assert store.idempotency("acme", "alice", "k") is not None
    with_key = dataclasses.replace(ALICE, credential_id="key:0123456789abcdef")
    assert service.write(with_key, body(id="m2"), idempotency_key="k").created
    assert store.head() == 2


# -- API keys in the store -----------------------------------------------------------------


def test_an_api_key_keeps_its_principal_expiry_and_last_use(store: Store) -> None:
    """A key reads back with its principal and expiry; its last use only moves forward."""
    expires = START + timedelta(days=90)
    record, _ = create_api_key(
        "acme",
        frozenset({"support-bot"}),
        frozenset({Scope.MEMORY_WRITE}),
        Trust.TRUSTED,
        START,
        "laptop",
        principal="alice@acme",
        expires_at=expires,
    )
    store.add_api_key(record)
    assert store.api_key(record.key_id) == record
    store.touch_api_key(record.key_id, START + timedelta(minutes=5))
    store.touch_api_key(record.key_id, START + timedelta(minutes=1))  # late, older: ignored
    store.touch_api_key("0000000000000000", START)  # no such key: nothing happens
    found = store.api_key(record.key_id)
    assert found is not None
    assert found.last_used_at == START + timedelta(minutes=5)
    assert (found.principal_id, found.expires_at) == ("alice@acme", expires)
    assert store.api_keys("acme") == [found]


def _read_key(store: Store, key_id: str, wait: bool) -> ApiKey | None:
    """The key's record as the HTTP edge reads it: without waiting if the store can."""
    try:
        return store.api_key(key_id, wait=wait)
    except ReadWouldWait:
        return store.api_key(key_id)


def test_a_key_read_again_after_its_revocation_reads_as_revoked(store: Store) -> None:
    """Every read of a key sees its stored state: a key read (and verified) before its
    revocation fails verification from the next read on, waiting or not."""
    record, token = create_api_key(
        "acme", None, frozenset({Scope.MEMORY_READ}), Trust.UNTRUSTED, START
    )
    store.add_api_key(record)
    _, secret = split_token(token)
    for wait in (True, False, True):
        assert verify(_read_key(store, record.key_id, wait), secret, START).tenant_id == "acme"
    assert store.revoke_api_key(record.key_id, START + timedelta(minutes=1))
    for wait in (True, False):
        found = _read_key(store, record.key_id, wait)
        assert found is not None and found.revoked_at == START + timedelta(minutes=1)
        with pytest.raises(AuthenticationError, match="revoked"):
            verify(found, secret, START + timedelta(minutes=2))


def test_a_key_without_a_named_principal_is_its_own(store: Store) -> None:
    """create_api_key without principal= gives key:<key id>, which four eyes then compare."""
    record, _ = create_api_key("acme", None, frozenset({Scope.MEMORY_READ}), Trust.UNTRUSTED, START)
    store.add_api_key(record)
    found = store.api_key(record.key_id)
    assert found is not None
    who = found.principal()
    assert who.principal_id == who.credential == f"key:{record.key_id}"


def test_an_expired_key_no_longer_authenticates(store: Store) -> None:
    """A key authenticates until its expiry, and from that instant is refused."""
    expires = START + timedelta(hours=1)
    record, token = create_api_key(
        "acme", None, frozenset({Scope.MEMORY_READ}), Trust.UNTRUSTED, START, expires_at=expires
    )
    store.add_api_key(record)
    _, secret = split_token(token)
    assert verify(store.api_key(record.key_id), secret, expires - timedelta(seconds=1))
    with pytest.raises(AuthenticationError) as refused:
        verify(store.api_key(record.key_id), secret, expires)
    assert refused.value.detail == "the API key expired at 2026-12-02T10:00:00.000000Z"
