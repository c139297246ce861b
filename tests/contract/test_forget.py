"""Forgetting a subject (SPEC §7): one event, every item deleted, the key destroyed."""

from __future__ import annotations

import pytest

from governed_memory.core.values import Scope, Status
from governed_memory.errors import GovernedMemoryError
from governed_memory.service import MemoryService
from tests.support.fakes import before_next_commit, body, principal, query

WRITER = principal()


def test_forget_deletes_every_memory_of_the_subject(service: MemoryService) -> None:
    """Every item of the subject, whatever its status, is deleted and loses its content."""
    service.write(WRITER, body(id="a", content="Likes email."))
    service.write(WRITER, body(id="b", content="Likes quarantine email.", trust="untrusted"))
    service.write(WRITER, body(id="c", content="Corrected email.", supersedes_id="a"))
    service.write(WRITER, body(id="other", subject_id="customer-2", content="Other email."))

    result = service.forget_subject(WRITER, "customer-1")

    assert result.affected == 3
    assert result.position == service.store.head()
    for memory_id in ("a", "b", "c"):
        item = service.get(WRITER, memory_id)
        assert item.status is Status.DELETED
        assert item.content is None
    assert [h.item.id for h in service.search(WRITER, query("email")).items] == ["other"]
    assert service.get(WRITER, "other").content == "Other email."
    forgets = [e for e in service.events_after(WRITER) if e.type == "subject.forgotten"]
    assert len(forgets) == 1
    assert forgets[0].subject_id == "customer-1"


def test_forget_is_idempotent(service: MemoryService) -> None:
    """Forgetting again changes nothing and reports 0 affected."""
    service.write(WRITER, body(id="a"))
    service.forget_subject(WRITER, "customer-1")
    head = service.store.head()

    again = service.forget_subject(WRITER, "customer-1")

    assert again.affected == 0
    assert service.store.head() == head


def test_forget_of_an_unknown_subject_affects_nothing(service: MemoryService) -> None:
    """A subject never written about is forgotten trivially, without an event."""
    assert service.forget_subject(WRITER, "nobody").affected == 0
    assert service.store.head() == 0


def test_forget_is_scoped_to_the_tenant(service: MemoryService) -> None:
    """Another tenant's subject with the same id keeps its memories and its key."""
    other = principal("globex")
    service.write(WRITER, body(id="a"))
    service.write(other, body(id="a"))

    service.forget_subject(WRITER, "customer-1")

    assert service.get(other, "a").content == "The customer prefers email over phone calls."
    assert service.store.subject_key("globex", "customer-1") is not None
    assert service.store.subject_key("acme", "customer-1") is None


def test_forget_ignores_the_agents_a_key_is_bound_to(service: MemoryService) -> None:
    """Erasure is subject-wide: the subject's key is shared by every agent of the tenant."""
    service.write(WRITER, body(id="a", agent_id="support-bot"))
    service.write(WRITER, body(id="b", agent_id="sales-bot"))
    dpo = principal(name="dpo", scopes={Scope.SUBJECT_FORGET}, agents={"support-bot"})
    assert service.forget_subject(dpo, "customer-1").affected == 2


def test_a_later_write_about_the_subject_gets_a_fresh_key(service: MemoryService) -> None:
    """After forget, new memories are readable under a new key; old ciphertext stays dead."""
    service.write(WRITER, body(id="a"))
    old_key = service.store.subject_key("acme", "customer-1")
    service.forget_subject(WRITER, "customer-1")

    service.write(WRITER, body(id="b", content="New fact after forget."))

    new_key = service.store.subject_key("acme", "customer-1")
    assert old_key is not None
    assert new_key is not None
    assert new_key.key_id != old_key.key_id
    assert service.get(WRITER, "b").content == "New fact after forget."
    assert service.get(WRITER, "a").content is None


def test_deleted_items_cannot_be_rewritten_or_reviewed(service: MemoryService) -> None:
    """Deleted is terminal."""
    service.write(WRITER, body(id="a", trust="untrusted"))
    service.forget_subject(WRITER, "customer-1")
    item = service.get(WRITER, "a")
    assert item.version == 2
    assert [e.type for e in service.history(WRITER, "a")] == [
        "memory.written",
        "subject.forgotten",
    ]


def test_a_refused_write_leaves_no_key_behind(service: MemoryService) -> None:
    """A write refused by the rules does not mint a subject key, so forget stays quiet."""
    import pytest

    from governed_memory.errors import VersionConflict

    with pytest.raises(VersionConflict):
        service.write(WRITER, body(id="m1", subject_id="customer-7", expected_version=4))
    assert service.store.subject_key("acme", "customer-7") is None
    assert service.forget_subject(WRITER, "customer-7").position is None
    assert service.store.head() == 0


def test_subject_keys_are_read_together_within_one_tenant(service: MemoryService) -> None:
    """One read returns the keys of the named subjects that have one, in the caller's
    tenant only; a forgotten subject's key is no longer among them."""
    for number, subject in enumerate(("customer-1", "customer-2")):
        service.write(WRITER, body(id=f"m{number}", subject_id=subject))
    service.write(principal("globex"), body(id="g", subject_id="customer-3"))
    found = service.store.subject_keys_for("acme", ["customer-2", "customer-1", "customer-3"])
    assert sorted(found) == ["customer-1", "customer-2"]  # customer-3 is globex's
    for subject, key in found.items():
        assert key == service.store.subject_key("acme", subject)
    assert service.store.subject_keys_for("acme", []) == {}
    service.forget_subject(WRITER, "customer-1")
    assert sorted(service.store.subject_keys_for("acme", ["customer-1", "customer-2"])) == [
        "customer-2"
    ]


def _forget_before_the_next_commit(service: MemoryService, subject: str) -> list[bool]:
    """Make the store forget ``subject`` just before it commits the next batch, as a
    forget on another thread or instance would, between a write's key read and its
    commit. Returns a list that gets one entry once that has happened."""
    return before_next_commit(service.store, lambda: service.forget_subject(WRITER, subject))


def test_a_write_racing_a_forget_is_sealed_again_under_a_fresh_key(
    service: MemoryService,
) -> None:
    """The subject is forgotten after the write read its key: the commit is refused
    (that key is gone) and the write is sealed again under a new key, so the new
    memory is readable and nothing lands under the destroyed key."""
    service.write(WRITER, body(id="old"))
    old_key = service.store.subject_key("acme", "customer-1")
    raced = _forget_before_the_next_commit(service, "customer-1")

    written = service.write(WRITER, body(id="new", content="Prefers letters now."))

    assert raced
    new_key = service.store.subject_key("acme", "customer-1")
    assert new_key is not None and old_key is not None
    assert new_key.key_id != old_key.key_id
    assert written.item.content == "Prefers letters now."
    assert service.get(WRITER, "new").content == "Prefers letters now."
    assert service.get(WRITER, "old").status is Status.DELETED


def test_a_retry_after_a_forget_that_the_rules_refuse_leaves_no_key(
    service: MemoryService,
) -> None:
    """A rewrite whose subject is forgotten under it finds its item deleted on retry:
    it is refused, and no fresh key is minted for the subject on its way out."""
    service.write(WRITER, body(id="old"))
    raced = _forget_before_the_next_commit(service, "customer-1")

    with pytest.raises(GovernedMemoryError):
        service.write(WRITER, body(id="old", expected_version=1, content="Changed."))

    assert raced
    assert service.store.subject_key("acme", "customer-1") is None
