"""The store port itself, on every backend: atomic batches, one winner, one event per key.

These drive ``Store.commit`` directly with batches made of hand-built core events and the
items the core's projection folds from them, as the service would commit them; the rest
of ``tests/contract`` reaches the stores through the service.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from governed_memory.core.events import MemoryWritten, StoredEvent, SubjectForgotten
from governed_memory.core.model import ItemState
from governed_memory.core.projection import apply, apply_forget
from governed_memory.core.values import Kind, Provenance, Status, Trust
from governed_memory.errors import (
    IdempotencyKeyTaken,
    SubjectChanged,
    SubjectKeyGone,
    VersionConflict,
)
from governed_memory.ports import Store
from governed_memory.records import (
    Batch,
    IdempotencyRecord,
    IndexDoc,
    ItemChange,
    SubjectKey,
)
from tests.support.fakes import START
from tests.support.threads import race

TENANT = "acme"
CREDENTIAL = "key:0123456789abcdef"
INDEX = IndexDoc({101: 1, 102: 2}, 3)


def written(
    memory_id: str, version: int = 1, *, subject: str = "customer-1", note: str = ""
) -> MemoryWritten:
    """The event of a write of ``memory_id`` producing ``version`` (content stands sealed)."""
    return MemoryWritten(
        event_id=f"e-{memory_id}-{version}-{note}",
        tenant_id=TENANT,
        memory_id=memory_id,
        version=version,
        occurred_at=START + timedelta(seconds=version),
        actor="writer",
        idempotency_key=None,
        agent_id="support-bot",
        subject_id=subject,
        purpose="support",
        kind=Kind.FACT,
        content=f"sealed {note}".encode(),
        content_hash=f"hash-{note}",
        provenance=Provenance("crm", "ticket-1"),
        trust=Trust.TRUSTED,
        confidence=0.9,
        expires_at=START + timedelta(days=30),
        supersedes_id=None,
        status=Status.ACTIVE,
        tokens=3,
    )


def write(
    event: MemoryWritten,
    current: ItemState | None = None,
    *,
    idempotency: IdempotencyRecord | None = None,
    require_key: SubjectKey | None = None,
) -> Batch:
    """The batch of one write: the event, and the item it folds to, guarded by version."""
    item = apply(current, event)
    expected = 0 if current is None else current.version
    change = ItemChange(item, expected, INDEX)
    return Batch(TENANT, [event], [change], idempotency, require_key)


def forget(subject: str, items: list[ItemState]) -> Batch:
    """The batch of a forget: its event, every item of the subject deleted, the key gone."""
    event = SubjectForgotten(
        event_id=f"forget-{subject}",
        tenant_id=TENANT,
        memory_id=None,
        version=None,
        occurred_at=START + timedelta(hours=1),
        actor="dpo",
        idempotency_key=None,
        subject_id=subject,
    )
    deleted = apply_forget(items, event)
    changes = [ItemChange(item, item.version - 1, None) for item in deleted]
    return Batch(TENANT, [event], changes, destroy_key=subject)


def key(subject: str = "customer-1", key_id: bytes = b"k1") -> SubjectKey:
    return SubjectKey(TENANT, subject, key_id, b"wrapped-" + key_id)


def stored_item(store: Store, memory_id: str) -> ItemState:
    item = store.get(TENANT, memory_id)
    assert item is not None
    return item


# -- compare-and-swap -----------------------------------------------------------------------


def test_concurrent_commits_on_one_expected_version_have_exactly_one_winner(
    store: Store,
) -> None:
    """Eight batches rewriting version 1 at once: one commits, seven get VersionConflict."""
    store.commit(write(written("m1")))
    current = stored_item(store, "m1")

    results = race(8, lambda i: store.commit(write(written("m1", 2, note=str(i)), current)))

    winners = [r for r in results if isinstance(r, list)]
    conflicts = [r for r in results if isinstance(r, VersionConflict)]
    assert len(winners) == 1 and len(conflicts) == 7, results
    assert {(c.expected_version, c.current_version) for c in conflicts} == {(1, 2)}
    (stored,) = winners[0]
    assert isinstance(stored.event, MemoryWritten)
    assert stored_item(store, "m1").content == stored.event.content  # the winner's write
    assert store.head() == 2


def test_concurrent_creators_of_one_id_have_exactly_one_winner(store: Store) -> None:
    """Eight batches creating one id at once: one commits, seven find version 1 there."""
    results = race(8, lambda i: store.commit(write(written("new", note=str(i)))))

    assert sum(isinstance(r, list) for r in results) == 1, results
    conflicts = [r for r in results if isinstance(r, VersionConflict)]
    assert {(c.expected_version, c.current_version) for c in conflicts} == {(0, 1)}
    assert len(conflicts) == 7
    assert store.head() == 1


def test_a_refused_batch_writes_nothing(store: Store) -> None:
    """A batch whose second change is stale leaves its first change and its events out."""
    store.commit(write(written("m1")))
    stale = write(written("m1", 2), stored_item(store, "m1"))
    fresh = write(written("m2"))
    both = Batch(TENANT, [*fresh.events, *stale.events], [*fresh.changes, *stale.changes])
    store.commit(stale)

    with pytest.raises(VersionConflict):
        store.commit(both)

    assert store.get(TENANT, "m2") is None
    assert store.head() == 2


# -- idempotency ----------------------------------------------------------------------------


def test_one_idempotency_key_commits_one_event_and_the_others_get_the_first_record(
    store: Store,
) -> None:
    """Eight batches with one key at once: one event, and IdempotencyKeyTaken carrying
    the first record (its fingerprint, result and position) for every other."""

    def attempt(i: int) -> list[StoredEvent]:
        record = IdempotencyRecord(
            TENANT, CREDENTIAL, "retry-1", f"fingerprint-{i}", {"memory_id": f"m{i}"}
        )
        return store.commit(write(written(f"m{i}"), idempotency=record))

    results = race(8, attempt)

    winners = [r for r in results if isinstance(r, list)]
    taken = [r for r in results if isinstance(r, IdempotencyKeyTaken)]
    assert len(winners) == 1 and len(taken) == 7, results
    (stored,) = winners[0]
    first = store.idempotency(TENANT, CREDENTIAL, "retry-1")
    assert first is not None
    assert first.position == stored.position
    assert first.result == {"memory_id": stored.event.memory_id}
    assert all(error.record == first for error in taken)
    assert store.head() == 1


def test_one_key_string_of_two_credentials_is_two_keys(store: Store) -> None:
    """The primary key is (tenant, credential, key): another credential's batch with the
    same key string commits, and each credential finds its own record."""
    mine = IdempotencyRecord(TENANT, CREDENTIAL, "crm-sync-1", "mine", {"memory_id": "m1"})
    theirs = IdempotencyRecord(TENANT, "key:fedcba9876543210", "crm-sync-1", "theirs", {})
    store.commit(write(written("m1"), idempotency=mine))
    store.commit(write(written("m2"), idempotency=theirs))
    assert store.head() == 2
    found = store.idempotency(TENANT, CREDENTIAL, "crm-sync-1")
    assert found is not None and (found.fingerprint, found.position) == ("mine", 1)
    other = store.idempotency(TENANT, "key:fedcba9876543210", "crm-sync-1")
    assert other is not None and (other.fingerprint, other.position) == ("theirs", 2)
    assert store.idempotency(TENANT, "key:1111111111111111", "crm-sync-1") is None


def test_a_key_taken_earlier_refuses_a_later_batch_with_the_stored_record(store: Store) -> None:
    """A second batch with a recorded key changes nothing and is told the first outcome."""
    record = IdempotencyRecord(
        TENANT, CREDENTIAL, "retry-2", "first", {"memory_id": "m1", "version": 1}
    )
    store.commit(write(written("m1"), idempotency=record))

    again = IdempotencyRecord(TENANT, CREDENTIAL, "retry-2", "second", {"memory_id": "m2"})
    with pytest.raises(IdempotencyKeyTaken) as caught:
        store.commit(write(written("m2"), idempotency=again))
    assert (caught.value.record.fingerprint, caught.value.record.position) == ("first", 1)
    assert caught.value.record.result == {"memory_id": "m1", "version": 1}

    assert store.get(TENANT, "m2") is None
    assert store.head() == 1


# -- order ----------------------------------------------------------------------------------


def test_events_after_follows_commit_order_under_concurrent_writers(store: Store) -> None:
    """Eight writers commit while a reader tails the log: the reader sees every position
    once, in increasing order, each holding the event its commit returned."""
    writers, per_writer = 8, 12
    done = threading.Event()
    seen: list[StoredEvent] = []

    def tail() -> None:
        after = 0
        while True:
            finished = done.is_set()
            page = store.events_after(None, after, 50)
            seen.extend(page)
            after = page[-1].position if page else after
            if finished and not page:
                return

    def append(i: int) -> list[StoredEvent]:
        committed: list[StoredEvent] = []
        for n in range(per_writer):
            first, second = written(f"w{i}-{n}"), written(f"w{i}-{n}-b")
            batch = write(first)
            extra = write(second)
            both = Batch(TENANT, [first, second], [*batch.changes, *extra.changes])
            committed.extend(store.commit(both))
        return committed

    reader = threading.Thread(target=tail)
    reader.start()
    results = race(writers, append)
    done.set()
    reader.join(timeout=120)

    total = writers * per_writer * 2
    assert [s.position for s in seen] == list(range(1, total + 1))
    committed = {s.position: s.event for r in results for s in r}
    assert {s.position: s.event for s in seen} == committed
    for r in results:  # a batch's events take consecutive positions, in batch order
        for first, second in zip(r[::2], r[1::2], strict=True):
            assert second.position == first.position + 1


# -- subject keys ---------------------------------------------------------------------------


def test_a_batch_requiring_a_destroyed_subject_key_is_refused(store: Store) -> None:
    """A write sealed under a key that a forget destroyed meanwhile is SubjectKeyGone."""
    sealing = store.add_subject_key(key(key_id=b"k1"))
    store.commit(forget("customer-1", []))

    with pytest.raises(SubjectKeyGone):
        store.commit(write(written("m1"), require_key=sealing))

    assert store.get(TENANT, "m1") is None
    assert store.subject_key(TENANT, "customer-1") is None


def test_a_batch_requiring_a_replaced_subject_key_is_refused(store: Store) -> None:
    """A write sealed under a key since replaced by a fresh one is SubjectKeyGone."""
    sealing = store.add_subject_key(key(key_id=b"k1"))
    store.commit(forget("customer-1", []))
    fresh = store.add_subject_key(key(key_id=b"k2"))

    with pytest.raises(SubjectKeyGone):
        store.commit(write(written("m1"), require_key=sealing))

    store.commit(write(written("m1"), require_key=fresh))
    assert stored_item(store, "m1").version == 1


def test_destroying_a_key_while_an_item_of_the_subject_is_left_is_refused(
    store: Store,
) -> None:
    """A forget that leaves an item of the subject undeleted is SubjectChanged and keeps
    the key; once it deletes every item, the key is destroyed."""
    store.add_subject_key(key())
    store.commit(write(written("m1")))
    store.commit(write(written("m2")))
    only_one = forget("customer-1", [stored_item(store, "m1")])

    with pytest.raises(SubjectChanged):
        store.commit(only_one)

    assert store.subject_key(TENANT, "customer-1") is not None
    assert stored_item(store, "m1").status is Status.ACTIVE
    store.commit(forget("customer-1", [stored_item(store, "m1"), stored_item(store, "m2")]))
    assert store.subject_key(TENANT, "customer-1") is None
    assert stored_item(store, "m2").status is Status.DELETED


def test_adding_a_subject_key_twice_keeps_the_first(store: Store) -> None:
    """The first key stored for a subject stays; a second one is not stored."""
    first = store.add_subject_key(key(key_id=b"k1"))

    assert store.add_subject_key(key(key_id=b"k2")) == first
    assert store.subject_key(TENANT, "customer-1") == first


def test_store_facts_are_absent_until_claimed_and_the_first_claim_wins(store: Store) -> None:
    """A named fact reads as absent, then as its first claim; a second claim gets the first."""
    assert store.meta("master_key_check") is None
    assert store.claim_meta("master_key_check", "first") == "first"
    assert store.claim_meta("master_key_check", "second") == "first"
    assert store.meta("master_key_check") == "first"


def test_concurrent_claims_of_one_fact_all_get_the_same_value(store: Store) -> None:
    """Sixteen claims racing for one name: every claimant is told the one value stored."""
    barrier = threading.Barrier(16)

    def claim(value: str) -> str:
        barrier.wait()
        return store.claim_meta("analyzer", value)

    with ThreadPoolExecutor(16) as pool:
        answers = set(pool.map(claim, [f"v{i}" for i in range(16)]))
    assert len(answers) == 1
    assert store.meta("analyzer") in answers


def test_a_replaced_fact_reads_as_its_new_value(store: Store) -> None:
    """Replacing a fact (a re-index records its new analyzer) overwrites the stored value."""
    store.claim_meta("analyzer", "english/1")
    store.replace_meta("analyzer", "german/1")
    assert store.meta("analyzer") == "german/1"


def test_a_writes_state_is_the_subjects_key_and_the_items_row_read_together(
    store: Store,
) -> None:
    assert store.write_state(TENANT, "customer-1", "m1") == (None, None)
    key = store.add_subject_key(SubjectKey(TENANT, "customer-1", b"k" * 16, b"w" * 40))
    assert store.write_state(TENANT, "customer-1", "m1") == (key, None)
    store.commit(write(written("m1")))
    subject_key, current = store.write_state(TENANT, "customer-1", "m1")
    assert subject_key == key
    assert current == store.get(TENANT, "m1")
    assert current is not None and current.version == 1
    assert store.write_state(TENANT, "customer-2", "m1") == (None, current)
    assert store.write_state("other", "customer-1", "m1") == (None, None)
