"""Erasure: forgetting a subject, and erasing one memory without forgetting its subject.

Forgetting a subject (SPEC §7) appends one ``subject.forgotten`` event, deletes every item
of the subject and destroys the subject's key, and with it every item key it wraps, in
one commit. It needs the ``subject:forget`` scope and nothing else (erasure is
subject-wide), and is idempotent: forgetting again changes nothing and affects 0 items.

Erasing one memory (``DELETE /v1/memories/{id}``): the item becomes ``deleted``; its own
key is destroyed in the same commit as the content-free ``memory.erased`` event, so the
content of every version of it, in the log and in exports alike, can no longer be opened
by anyone. Erase needs the ``subject:forget``
scope, like forget; no principal erases what it wrote itself (four eyes, as for review);
another tenant's item, or one of an agent the key cannot act for, is not found.

Erase is idempotent like forget: erasing a deleted item (erased, or its subject forgotten)
changes nothing and answers with the position of the event that deleted it. An item
written before items had keys of their own cannot be erased alone (409: forget its
subject instead).
"""

from __future__ import annotations

from governed_memory.core import access, lifecycle, values
from governed_memory.core.commands import EraseMemory, ForgetSubject
from governed_memory.core.events import MemoryWritten, StoredEvent, SubjectForgotten
from governed_memory.core.model import ItemState, Principal
from governed_memory.core.projection import apply_forget, versions_of
from governed_memory.core.values import Status
from governed_memory.crypto import Keyring
from governed_memory.errors import SubjectChanged, VersionConflict
from governed_memory.records import Batch, ItemChange
from governed_memory.results import EraseResult, ForgetResult
from governed_memory.service._support import UseCase, changes, retried
from governed_memory.service.idempotency import (
    Keyed,
    fingerprint,
    parse_key,
    record_of,
)


class Erasure(UseCase):
    """Forgets subjects and erases single items over one store."""

    # -- forget a subject -----------------------------------------------------------------

    def forget(
        self, principal: Principal, subject: str, idempotency_key: str | None
    ) -> ForgetResult:
        """Forget a subject (see the module's docstring); retried if it changes meanwhile."""
        command = ForgetSubject(values.subject_id(subject))
        key = parse_key(idempotency_key)
        access.require_forget(principal)
        digest = fingerprint(command.fingerprint())
        keyed = self._idempotency.for_forget(principal, key, digest)
        return self._idempotency.once(
            keyed,
            lambda: retried(
                lambda: self._forget(principal, command, keyed, digest),
                on=(VersionConflict, SubjectChanged),  # an item changed meanwhile: look again
                exhausted="the subject kept changing during the forget; retry",
            ),
        )

    def _forget(
        self,
        principal: Principal,
        command: ForgetSubject,
        keyed: Keyed[ForgetResult] | None,
        digest: str,
    ) -> ForgetResult:
        tenant, subject = principal.tenant_id, command.subject_id
        items = self._store.subject_items(tenant, subject)
        subject_key = self._vault.subject_key(tenant, subject)
        ctx = self._context(principal, keyed)
        events = lifecycle.decide_forget(ctx, command, items, subject_key is not None)
        rows: list[ItemChange] = []
        if events:
            forgotten = events[0]
            assert isinstance(forgotten, SubjectForgotten)
            rows = [ItemChange(item, item.version - 1) for item in apply_forget(items, forgotten)]
        record = record_of(keyed, digest, {"subject_id": subject, "affected": len(rows)})
        stored = self._commit(Batch(tenant, events, rows, record, destroy_key=subject))
        if subject_key is not None:
            self._vault.destroyed(subject_key.key_id)
        for item in items:  # and the item keys it wrapped, as far as this process holds them
            if item.content is not None:
                self._vault.destroyed(Keyring.key_id_of(item.content))
        return ForgetResult(subject, len(rows), stored[0].position if stored else None)

    # -- erase one memory -----------------------------------------------------------------

    def erase(
        self, principal: Principal, memory_id: str, idempotency_key: str | None
    ) -> EraseResult:
        """Erase one item (see the module's docstring); retried if it changes meanwhile."""
        command = EraseMemory(values.memory_id(memory_id))
        key = parse_key(idempotency_key)
        access.require_erase(principal)
        digest = fingerprint(command.fingerprint())
        keyed = self._idempotency.for_erase(principal, key, digest)
        return self._idempotency.once(
            keyed,
            lambda: retried(
                lambda: self._erase(principal, command, keyed, digest),
                on=(VersionConflict,),  # the item changed meanwhile: look again
                exhausted="the memory kept changing during the erase; retry",
            ),
        )

    def _erase(
        self,
        principal: Principal,
        command: EraseMemory,
        keyed: Keyed[EraseResult] | None,
        digest: str,
    ) -> EraseResult:
        tenant = principal.tenant_id
        current = self._store.get(tenant, command.memory_id)
        log = self._log(principal, current)
        writers = frozenset(s.event.actor for s in log if isinstance(s.event, MemoryWritten))
        legacy = current is not None and self._vault.is_legacy(current)
        ctx = self._context(principal, keyed)
        events = lifecycle.decide_erase(ctx, command, current, writers, legacy=legacy)
        assert current is not None  # decide raised NotFound otherwise
        if not events:  # deleted already: nothing to destroy, the first deletion answers
            position = _deleted_at(current.id, log)
            record = record_of(keyed, digest, {"id": current.id, "position": position})
            if record is not None:
                self._commit(Batch(tenant, [], [], record))
            return EraseResult(current.id, position)
        rows = changes(events, {current.id: current}, {})
        record = record_of(keyed, digest, {"id": current.id, "position": None})
        batch = Batch(tenant, events, rows, record, destroy_item_key=current.id)
        stored = self._commit(batch)
        if current.content is not None:
            self._vault.destroyed(Keyring.key_id_of(current.content))
        return EraseResult(current.id, stored[0].position)

    def _log(self, principal: Principal, current: ItemState | None) -> list[StoredEvent]:
        """The item's events (and its subject's forgets), if the caller may know of it."""
        if current is None or not access.visible(principal, current):
            return []
        return self._store.memory_events(current.tenant_id, current.id, current.subject_id)


def _deleted_at(memory_id: str, log: list[StoredEvent]) -> int | None:
    """The position of the event that deleted the item: its erase or its subject's forget
    (the log holds every forget of the subject; only one of them deleted this item)."""
    for stored, item in versions_of(memory_id, log):
        if item.status is Status.DELETED:
            return stored.position
    return None
