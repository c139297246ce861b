"""Erasing one memory (SPEC §7) on every backend: deleted, every version's content gone
with the item's own key, a content-free ``memory.erased`` left in the log; who may erase."""

from __future__ import annotations

import dataclasses

import pytest

from governed_memory.core.events import StoredEvent
from governed_memory.core.values import Scope, Status
from governed_memory.crypto import Keyring
from governed_memory.errors import (
    CryptoError,
    IdempotencyKeyReused,
    InvalidTransition,
    NotFound,
    PermissionDenied,
    SelfPromotion,
)
from governed_memory.service import MemoryService
from tests.support.fakes import FakeClock, before_next_commit, body, principal, query, reviewer
from tests.support.legacy import write_legacy

WRITER = principal()
#: A data protection officer: erases and forgets, and is not the writer.
DPO = principal(name="dpo", scopes={Scope.SUBJECT_FORGET, Scope.MEMORY_READ, Scope.AUDIT_READ})


def test_erase_deletes_one_memory_and_destroys_its_key(service: MemoryService) -> None:
    """The item is deleted without content, its key row is gone, one content-free event is
    logged; the subject's other memories, its key and search are untouched."""
    service.write(WRITER, body(id="a", content="Card number written by mistake."))
    service.write(WRITER, body(id="a", content="Card number, rewritten.", expected_version=1))
    service.write(WRITER, body(id="b", content="Prefers email over phone."))

    result = service.erase(DPO, "a")

    assert result.id == "a"
    assert result.position == service.store.head()
    item = service.get(DPO, "a")
    assert (item.status, item.content, item.version) == (Status.DELETED, None, 3)
    assert service.store.item_key("acme", "a") is None
    state = service.store.get("acme", "a")
    assert state is not None and state.tokens == 0
    assert service.get(DPO, "b").content == "Prefers email over phone."
    assert service.store.item_key("acme", "b") is not None
    assert service.store.subject_key("acme", "customer-1") is not None
    erased = service.events_after(WRITER)[-1]
    assert (erased.type, erased.memory_id, erased.actor) == ("memory.erased", "a", "dpo")
    stored = service.store.events_after("acme", result.position - 1, 1)[0]
    assert vars_of(stored) == {}  # the event carries nothing but its header
    assert [h.item.id for h in service.search(WRITER, query("card email")).items] == ["b"]
    assert service.verify_replay().ok


def vars_of(stored: StoredEvent) -> dict[str, object]:
    """The fields an event adds to the header every item event has."""
    header = {"event_id", "tenant_id", "memory_id", "version", "occurred_at", "actor"}
    header.add("idempotency_key")
    return {
        f.name: getattr(stored.event, f.name)
        for f in dataclasses.fields(stored.event)
        if f.name not in header
    }


def test_no_key_left_opens_any_version_of_an_erased_memory(
    service: MemoryService, keyring: Keyring
) -> None:
    """Every blob the log holds for the erased item, of each version, fails with every key
    the store still has; the sibling's blob still opens with its own."""
    service.write(WRITER, body(id="a", content="First version."))
    service.write(WRITER, body(id="a", content="Second version.", expected_version=1))
    service.write(WRITER, body(id="b"))
    service.erase(DPO, "a")

    subject = service.store.subject_key("acme", "customer-1")
    assert subject is not None
    remaining = [keyring.item_sealing_key(subject, k) for k in service.store.item_keys()]
    assert [key.memory_id for key in remaining] == ["b"]
    blobs = [
        (s.event.version, s.event.content)
        for s in service.store.events_after("acme", 0, 100)
        if s.event.memory_id == "a" and s.event.type == "memory.written"
    ]
    assert len(blobs) == 2
    for version, blob in blobs:
        assert Keyring.key_id_of(blob) not in {key.key_id for key in remaining}
        for key in remaining:
            with pytest.raises(CryptoError):
                keyring.open(dataclasses.replace(key, memory_id="a"), version, blob)


def test_erase_needs_the_forget_scope(service: MemoryService) -> None:
    """A key without subject:forget is refused (403) and nothing changes."""
    service.write(WRITER, body(id="a"))
    reader = principal(name="reader", scopes={Scope.MEMORY_READ, Scope.MEMORY_REVIEW})
    head = service.store.head()
    with pytest.raises(PermissionDenied):
        service.erase(reader, "a")
    assert service.store.head() == head


@pytest.mark.parametrize(
    "caller",
    [
        principal("globex", "dpo", scopes={Scope.SUBJECT_FORGET}),
        principal(name="dpo", scopes={Scope.SUBJECT_FORGET}, agents={"sales-bot"}),
    ],
    ids=["other-tenant", "other-agent"],
)
def test_a_memory_the_key_cannot_see_is_not_found(service: MemoryService, caller: object) -> None:
    """Another tenant's memory, or one of an agent the key cannot act for, is reported as
    unknown (404), never as forbidden: erase is no existence oracle."""
    service.write(WRITER, body(id="a"))
    with pytest.raises(NotFound):
        service.erase(caller, "a")  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        service.erase(DPO, "never-written")
    assert service.get(WRITER, "a").status is Status.ACTIVE


def test_nobody_erases_what_their_own_principal_wrote(service: MemoryService) -> None:
    """The writer of any version of the memory is refused, even with the forget scope; an
    item rewritten by another principal stays out of its first writer's reach too."""
    other = principal(name="other-writer")
    service.write(WRITER, body(id="a"))
    service.write(other, body(id="a", content="Rewritten by another.", expected_version=1))
    for who in (WRITER, other):
        with pytest.raises(SelfPromotion):
            service.erase(who, "a")
    assert service.erase(DPO, "a").position is not None


def test_erasing_again_changes_nothing_and_names_the_first_erase(
    service: MemoryService,
) -> None:
    """Erase is idempotent, as forget is: the same position again, no new event."""
    service.write(WRITER, body(id="a"))
    first = service.erase(DPO, "a")
    head = service.store.head()
    again = service.erase(principal(name="another-dpo", scopes={Scope.SUBJECT_FORGET}), "a")
    assert again == first
    assert service.store.head() == head


def test_erasing_a_forgotten_memory_names_the_forget(service: MemoryService) -> None:
    """A memory deleted with its subject is erased already: the answer is the forget's
    position (not a later forget of the same subject), and nothing is written."""
    service.write(WRITER, body(id="a"))
    forgotten = service.forget_subject(DPO, "customer-1")
    service.write(WRITER, body(id="b"))
    service.forget_subject(DPO, "customer-1")
    head = service.store.head()
    assert service.erase(DPO, "a").position == forgotten.position
    assert service.store.head() == head


@pytest.mark.parametrize("status", ["quarantined", "rejected", "superseded", "expired"])
def test_a_memory_in_any_status_but_deleted_can_be_erased(
    service: MemoryService, clock: FakeClock, status: str
) -> None:
    """Quarantined, rejected, superseded and expired memories are erased like active ones."""
    service.write(WRITER, body(id="a", trust="untrusted", ttl_seconds=60))
    if status == "rejected":
        service.reject(reviewer(), "a", expected_version=1, reason="Wrong card number.")
    elif status == "superseded":
        service.promote(reviewer(), "a", expected_version=1)
        service.write(WRITER, body(id="fix", supersedes_id="a", content="Corrected."))
    elif status == "expired":
        clock.advance(seconds=61)
        service.expire_due()
    assert service.get(DPO, "a").status.value == status
    service.erase(DPO, "a")
    assert (service.get(DPO, "a").status, service.get(DPO, "a").content) == (Status.DELETED, None)
    assert service.verify_replay().ok


def test_an_erase_with_an_idempotency_key_answers_its_retries_alike(
    service: MemoryService,
) -> None:
    """A retried keyed erase gets the first answer and writes nothing; the same key for
    another memory is refused."""
    service.write(WRITER, body(id="a"))
    service.write(WRITER, body(id="b"))
    first = service.erase(DPO, "a", idempotency_key="erase-a")
    head = service.store.head()
    assert service.erase(DPO, "a", idempotency_key="erase-a") == first
    assert service.store.head() == head
    with pytest.raises(IdempotencyKeyReused):
        service.erase(DPO, "b", idempotency_key="erase-a")
    keyed = next(
        e
        for e in service.store.events_after("acme", 0, 100)
        if e.event.memory_id == "a" and e.event.type == "memory.erased"
    )
    assert keyed.event.idempotency_key == "erase-a"


def test_a_keyed_write_retried_after_its_memory_was_erased_replays_without_content(
    service: MemoryService,
) -> None:
    """Its content hash died with the item's key: the retry gets the first answer without
    content, and nothing is written."""
    request = body(id="a", content="Written once, then erased.")
    first = service.write(WRITER, request, idempotency_key="w")
    service.erase(DPO, "a")
    head = service.store.head()
    again = service.write(WRITER, request, idempotency_key="w")
    assert again == dataclasses.replace(first, item=dataclasses.replace(first.item, content=None))
    assert service.store.head() == head


def test_an_erase_that_loses_a_race_to_a_rewrite_erases_the_rewrite(
    service: MemoryService,
) -> None:
    """The memory is rewritten between the erase's read and its commit: the erase is
    refused by the version guard, looks again, and erases the new version too."""
    service.write(WRITER, body(id="a"))
    store = service.store
    rewrite = body(id="a", content="Rewritten meanwhile.", expected_version=1)
    raced = before_next_commit(store, lambda: service.write(WRITER, rewrite))
    result = service.erase(DPO, "a")
    assert raced
    item = service.get(DPO, "a")
    assert (item.status, item.version, item.content) == (Status.DELETED, 3, None)
    assert result.position == store.head()
    assert store.item_key("acme", "a") is None


def test_a_memory_written_before_items_had_keys_cannot_be_erased_alone(
    service: MemoryService,
) -> None:
    """Its content is sealed under the subject key: 409 naming the remedy, nothing written;
    forgetting the subject still destroys it."""
    write_legacy(service, WRITER, body(id="old", content="Written long ago."))
    assert service.get(WRITER, "old").content == "Written long ago."
    head = service.store.head()
    with pytest.raises(InvalidTransition, match="forget the subject") as refused:
        service.erase(DPO, "old")
    assert refused.value.current_version == 1
    assert service.store.head() == head
    assert service.forget_subject(DPO, "customer-1").affected == 1
    assert service.get(WRITER, "old").content is None


def test_a_memory_written_before_items_had_keys_stays_so_when_rewritten(
    service: MemoryService, keyring: Keyring
) -> None:
    """A rewrite of such a memory keeps sealing under the subject key (its older versions
    could not be destroyed alone anyway), reads back, and is found."""
    write_legacy(service, WRITER, body(id="old", content="Written long ago."))
    service.write(WRITER, body(id="old", content="Rewritten email today.", expected_version=1))
    state = service.store.get("acme", "old")
    assert state is not None and state.content is not None
    assert Keyring.blob_format(state.content) == 1
    assert service.store.item_key("acme", "old") is None
    assert service.get(WRITER, "old").content == "Rewritten email today."
    assert [h.item.id for h in service.search(WRITER, query("email")).items] == ["old"]
