"""Creates that read nothing first (``MemoryService._create_unread``), on every backend.

A create (expected version 0, no correction) of an item of a subject whose key a commit
of this process found live lately is decided and committed without reading: its commit
checks, under the write lock, that the idempotency key is unused, that the subject key
is the one it sealed with and that the item does not exist. Whatever that check refuses
is decided again on what is read, exactly as a write that read first: these tests make
each check refuse and require the answer the full path gives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from governed_memory.core.values import Status
from governed_memory.crypto import Keyring
from governed_memory.errors import (
    IdempotencyKeyReused,
    InvalidTransition,
    VersionConflict,
)
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from tests.support.fakes import FakeClock, agent_key, before_next_commit, body, principal
from tests.support.threads import race

WRITER = principal()


def reads_of(store: Store) -> list[str]:
    """From now on, the name of each read a write decides on, as ``store`` serves it."""
    seen: list[str] = []
    for name in ("write_state", "get", "idempotency", "subject_key"):
        read: Callable[..., Any] = getattr(store, name)

        def counting(*args: Any, _name: str = name, _read: Callable[..., Any] = read) -> Any:
            seen.append(_name)
            return _read(*args)

        setattr(store, name, counting)
    return seen


def other_instance(service: MemoryService, keyring: Keyring) -> MemoryService:
    """A second service over the same store and master key: another process's view."""
    return MemoryService(service.store, keyring, clock=FakeClock())


def test_a_create_of_a_subject_written_before_reads_nothing_first(
    service: MemoryService,
) -> None:
    """Its commit is all it sends; the subject's first write and a rewrite read first."""
    reads = reads_of(service.store)
    service.write(WRITER, body(id="first"))
    assert "write_state" in reads
    reads.clear()
    created = service.write(WRITER, body(id="second", content="Prefers letters."))
    assert reads == []
    assert created.created and created.item.version == 1
    assert service.get(WRITER, "second").content == "Prefers letters."
    reads.clear()
    service.write(WRITER, body(id="second", content="Prefers faxes.", expected_version=1))
    assert "write_state" in reads
    assert service.verify_replay().ok


def test_a_forget_elsewhere_before_the_commit_sends_the_create_down_the_full_path(
    service: MemoryService, keyring: Keyring
) -> None:
    """Another instance forgets the subject between this create's decision and its
    commit: the commit refuses the destroyed key, nothing lands under it, and the write
    is decided again on what is read, sealed under the subject's fresh key."""
    service.write(WRITER, body(id="old"))
    old_key = service.store.subject_key("acme", "customer-1")
    assert old_key is not None
    elsewhere = other_instance(service, keyring)
    reads = reads_of(service.store)
    raced = before_next_commit(
        service.store, lambda: elsewhere.forget_subject(WRITER, "customer-1")
    )

    written = service.write(WRITER, body(id="new", content="Prefers letters now."))

    assert raced
    assert reads.count("write_state") == 1  # the create tried first without it
    new_key = service.store.subject_key("acme", "customer-1")
    assert new_key is not None and new_key.key_id != old_key.key_id
    item_key = service.store.item_key("acme", "new")
    assert item_key is not None and item_key.subject_id == "customer-1"
    state = service.store.get("acme", "new")
    assert state is not None and state.content is not None
    assert Keyring.key_id_of(state.content) == item_key.key_id
    assert written.item.content == "Prefers letters now."
    assert service.get(WRITER, "new").content == "Prefers letters now."
    assert service.get(WRITER, "old").status is Status.DELETED
    assert service.get(WRITER, "old").content is None
    assert service.verify_replay().ok


def test_a_forget_elsewhere_after_the_key_was_confirmed_is_caught_at_the_commit(
    service: MemoryService, keyring: Keyring
) -> None:
    """The other instance's forget committed before the create was even decided: this
    process still holds the key as confirmed, its commit is refused, and the create
    lands under a fresh key; the forgotten key stays destroyed and its item deleted."""
    service.write(WRITER, body(id="old"))
    old_key = service.store.subject_key("acme", "customer-1")
    assert old_key is not None
    assert other_instance(service, keyring).forget_subject(WRITER, "customer-1").affected == 1

    service.write(WRITER, body(id="new", content="Prefers letters now."))

    new_key = service.store.subject_key("acme", "customer-1")
    assert new_key is not None and new_key.key_id != old_key.key_id
    assert service.store.subject_keys_for("acme", ["customer-1"]) == {"customer-1": new_key}
    assert service.get(WRITER, "old").content is None
    assert service.get(WRITER, "new").content == "Prefers letters now."
    assert service.verify_replay().ok


def test_a_forget_in_this_process_drops_the_confirmed_key(service: MemoryService) -> None:
    """After this process forgets the subject, its next create reads first."""
    service.write(WRITER, body(id="old"))
    service.forget_subject(WRITER, "customer-1")
    reads = reads_of(service.store)
    service.write(WRITER, body(id="new"))
    assert "write_state" in reads


def test_a_forget_here_between_a_commit_and_its_confirmation_keeps_the_key_unconfirmed(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create commits under the subject's key; before it records the key as confirmed,
    a forget in this process destroys it. The destroyed key is not confirmed after all:
    the next create reads first (its key would otherwise be unwrapped again here)."""
    service.write(WRITER, body(id="old"))
    key = service.store.subject_key("acme", "customer-1")
    assert key is not None
    vault = service._vault
    confirm = vault.confirm
    forgotten: list[bool] = []

    def forget_first(confirmed: Any) -> None:
        if not forgotten:
            forgotten.append(True)
            service.forget_subject(WRITER, "customer-1")
        confirm(confirmed)

    monkeypatch.setattr(vault, "confirm", forget_first)
    service.write(WRITER, body(id="racing"))
    assert forgotten
    assert vault.confirmed_key("acme", "customer-1") is None
    reads = reads_of(service.store)
    service.write(WRITER, body(id="after"))
    assert "write_state" in reads
    fresh = service.store.subject_key("acme", "customer-1")
    assert fresh is not None and fresh.key_id != key.key_id


def test_an_item_created_meanwhile_by_another_writer_leaves_one_winner(
    service: MemoryService, keyring: Keyring
) -> None:
    """Another instance creates the id first: the unread create's insert is refused and
    the full path reports the conflict it reads (the version the caller may see)."""
    service.write(WRITER, body(id="warm"))
    other_instance(service, keyring).write(WRITER, body(id="x", content="First."))

    with pytest.raises(VersionConflict) as caught:
        service.write(WRITER, body(id="x", content="Second."))

    assert (caught.value.expected_version, caught.value.current_version) == (0, 1)
    assert service.get(WRITER, "x").content == "First."
    assert service.verify_replay().ok


def test_an_id_taken_by_an_item_the_caller_cannot_see_keeps_its_version_hidden(
    service: MemoryService, keyring: Keyring
) -> None:
    """The refused insert knows the other item's version; the answer must not: it is
    decided from the read, as a clash of ids and nothing more."""
    bot = agent_key(agent="support-bot")
    other_bot = agent_key(agent="sales-bot")
    service.write(bot, body(id="warm", trust="untrusted"))
    service.write(other_bot, body(id="x", agent_id="sales-bot", trust="untrusted"))

    with pytest.raises(InvalidTransition) as caught:
        service.write(bot, body(id="x", trust="untrusted"))

    assert not isinstance(caught.value, VersionConflict)


def test_sixteen_creators_of_one_id_of_a_known_subject_have_one_winner(
    service: MemoryService,
) -> None:
    """Every creator skips its read; exactly one insert wins, the rest conflict."""
    service.write(WRITER, body(id="warm"))
    results = race(16, lambda i: service.write(WRITER, body(id="new", content=f"Creator {i}.")))
    assert sum(not isinstance(r, Exception) for r in results) == 1
    conflicts = [r for r in results if isinstance(r, VersionConflict)]
    assert len(conflicts) == 15 and {c.current_version for c in conflicts} == {1}
    assert service.verify_replay().ok


def test_an_idempotent_replay_of_an_unread_create_returns_the_first_result(
    service: MemoryService,
) -> None:
    """The replay's commit meets the key's record; the first answer comes back, with the
    id the server chose the first time, and nothing is written."""
    service.write(WRITER, body(id="warm"))
    first = service.write(WRITER, body(content="Prefers email."), idempotency_key="req-1")
    head = service.store.head()
    again = service.write(WRITER, body(content="Prefers email."), idempotency_key="req-1")
    assert again == first and again.item.id == first.item.id
    assert service.store.head() == head
    with pytest.raises(IdempotencyKeyReused):
        service.write(WRITER, body(content="Prefers phone."), idempotency_key="req-1")
    assert service.store.head() == head


def test_twelve_concurrent_unread_retries_of_one_key_make_one_event(
    service: MemoryService,
) -> None:
    service.write(WRITER, body(id="warm"))
    head = service.store.head()
    results = race(12, lambda i: service.write(WRITER, body(), idempotency_key="req-9"))
    assert not [r for r in results if isinstance(r, Exception)]
    assert len({r.item.id for r in results}) == 1  # type: ignore[union-attr]
    assert service.store.head() == head + 1


def test_a_replay_after_a_forget_elsewhere_answers_without_minting_a_key(
    service: MemoryService, keyring: Keyring
) -> None:
    """The subject was forgotten by another instance after the keyed create: the replay
    still answers with the first result (its content gone with the key), and leaves no
    key behind for the subject."""
    service.write(WRITER, body(id="warm"))
    first = service.write(WRITER, body(id="m1"), idempotency_key="req-2")
    other_instance(service, keyring).forget_subject(WRITER, "customer-1")
    head = service.store.head()

    again = service.write(WRITER, body(id="m1"), idempotency_key="req-2")

    assert (again.item.id, again.item.version, again.created) == ("m1", 1, True)
    assert again.item.content is None and first.item.content is not None
    assert service.store.subject_key("acme", "customer-1") is None
    assert service.store.head() == head


def test_an_unread_create_with_a_stale_expected_version_is_a_conflict(
    service: MemoryService,
) -> None:
    """A create (expected version 0) of an id that exists conflicts with its version; a
    rewrite with a stale version is decided on its read, as always."""
    service.write(WRITER, body(id="m1"))
    service.write(WRITER, body(id="m1", content="Second.", expected_version=1))
    with pytest.raises(VersionConflict) as created:
        service.write(WRITER, body(id="m1", content="Third."))
    with pytest.raises(VersionConflict) as rewritten:
        service.write(WRITER, body(id="m1", content="Third.", expected_version=1))
    assert (created.value.expected_version, created.value.current_version) == (0, 2)
    assert (rewritten.value.expected_version, rewritten.value.current_version) == (1, 2)
    assert service.get(WRITER, "m1").content == "Second."


def test_an_untrusted_unread_create_lands_in_quarantine(service: MemoryService) -> None:
    """The status comes from the command's trust, read or not."""
    service.write(WRITER, body(id="warm"))
    bot = agent_key(agent="support-bot")
    reads = reads_of(service.store)
    written = service.write(bot, body(id="q1", trust="untrusted"))
    assert reads == []
    assert written.item.status is Status.QUARANTINED
