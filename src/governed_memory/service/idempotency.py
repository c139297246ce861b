"""Idempotency keys: one protocol for every keyed command (write, promote, reject, forget,
erase).

Idempotency records belong to the credential that made them (SPEC §5): a request made
with an idempotency key looks for the record its own credential made with that key in its
tenant, so another key's use of the same key string neither replays nor blocks it, and
says nothing about which keys others use. It finds:

* none: the command runs, and its record commits in the same batch as its events;
* the record of the same request: the first answer again, and nothing is written;
* the record of another request, even of another operation: :class:`IdempotencyKeyReused`
  (fingerprints, which name the operation, are compared before anything else of the
  record is read).

Two retries of one key can both find no record. One commits; the other then meets the
record (the store refuses its batch: ``IdempotencyKeyTaken``) or the item its twin has
changed (a ``Conflict``), and answers with its twin's result instead of an error.

A replay is authorized like the request it repeats (the service checks before it asks)
and answers as the first request was answered, to the credential that made it: the item
as of the recorded version, if the caller may still see it, and without content once that
content is destroyed (its subject forgotten, the item erased or past its retention window).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from governed_memory.core import values
from governed_memory.core.access import require_visible
from governed_memory.core.commands import WriteMemory
from governed_memory.core.model import ItemState, MemoryItem, Principal
from governed_memory.core.projection import versions_of
from governed_memory.core.values import Status
from governed_memory.errors import Conflict, IdempotencyKeyReused, IdempotencyKeyTaken, NotFound
from governed_memory.ports import Store
from governed_memory.records import IdempotencyRecord
from governed_memory.results import EraseResult, ForgetResult, WriteResult
from governed_memory.service.vault import Vault

R = TypeVar("R")


def parse_key(raw: str | None) -> str | None:
    """A request's idempotency key, validated; ``None`` when it has none."""
    return None if raw is None else values.idempotency_key(raw)


def fingerprint(request: Mapping[str, Any]) -> str:
    """The digest that tells two requests apart: SHA-256 of their canonical JSON."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


@dataclass(frozen=True, slots=True)
class Keyed(Generic[R]):
    """A request made with an idempotency key: how to know it again, how to answer again."""

    tenant_id: str
    credential: str
    key: str
    same_request: Callable[[IdempotencyRecord], bool]
    answer: Callable[[IdempotencyRecord], R]


def keyed_by(
    principal: Principal,
    key: str,
    same_request: Callable[[IdempotencyRecord], bool],
    answer: Callable[[IdempotencyRecord], R],
) -> Keyed[R]:
    """A keyed request of ``principal``: looked up in its tenant, under its credential."""
    return Keyed(principal.tenant_id, principal.credential, key, same_request, answer)


def record_of(
    keyed: Keyed[Any] | None, digest: str, result: Mapping[str, Any]
) -> IdempotencyRecord | None:
    """The record to commit with a keyed request's events; ``None`` without a key."""
    if keyed is None:
        return None
    return IdempotencyRecord(keyed.tenant_id, keyed.credential, keyed.key, digest, result)


class Idempotency:
    """Answers repeated requests from their key's record, over one store."""

    def __init__(self, store: Store, vault: Vault) -> None:
        self._store = store
        self._vault = vault

    def once(self, keyed: Keyed[R] | None, attempt: Callable[[], R]) -> R:
        """``attempt`` the request, unless its key has answered it already.

        If the attempt then loses to a twin retry that committed meanwhile, the twin's
        answer is this request's answer too.
        """
        if keyed is None:
            return attempt()
        replayed = self.replay(keyed)
        if replayed is not None:
            return replayed
        try:
            return attempt()
        except (IdempotencyKeyTaken, Conflict):
            replayed = self.replay(keyed)
            if replayed is None:
                raise  # a real conflict, not a twin's doing
            return replayed

    def replay(self, keyed: Keyed[R]) -> R | None:
        """The first answer to the key; ``None`` if the key is unused so far."""
        record = self._store.idempotency(keyed.tenant_id, keyed.credential, keyed.key)
        if record is None:
            return None
        if not keyed.same_request(record):
            raise IdempotencyKeyReused(
                f"idempotency key {keyed.key!r} was used for a different request"
            )
        return keyed.answer(record)

    # -- the keyed requests ---------------------------------------------------------------

    def for_write(
        self, principal: Principal, command: WriteMemory, key: str | None
    ) -> Keyed[WriteResult] | None:
        """A keyed write: its content is compared by its keyed hash, never in plaintext."""
        if key is None:
            return None
        tenant = principal.tenant_id

        def same_request(record: IdempotencyRecord) -> bool:
            # Only a write's record may be the same write; the record of a promotion, a
            # forget or an erase is another request, whatever it names.
            if not _made_by_write(record):
                return False
            # The hash under the key of the recorded item (its own key, which every version
            # shares, or an old item's subject key), looked up now: the first request or a
            # twin made it. Once that key is destroyed, the hash died with it.
            memory_id = record.result["memory_id"]
            current = self._store.get(tenant, memory_id)
            key = None if current is None else self._vault.content_key(current)
            content_hash = self._vault.content_hash(key, command.content)
            if record.fingerprint == fingerprint(command.fingerprint(content_hash)):
                return True
            return _destroyed_since(current, memory_id, command)

        def answer(record: IdempotencyRecord) -> WriteResult:
            item = self.item_at(principal, record.result["memory_id"], record.result["version"])
            return WriteResult(item, bool(record.result["created"]))

        return keyed_by(principal, key, same_request, answer)

    def for_review(
        self, principal: Principal, key: str | None, digest: str
    ) -> Keyed[MemoryItem] | None:
        """A keyed promotion or rejection, answered with the item as the review left it."""
        if key is None:
            return None
        return keyed_by(
            principal,
            key,
            lambda record: record.fingerprint == digest,
            lambda record: self.item_at(
                principal, record.result["memory_id"], record.result["version"]
            ),
        )

    def for_erase(
        self, principal: Principal, key: str | None, digest: str
    ) -> Keyed[EraseResult] | None:
        """A keyed erase, answered with the item and the position of the erase (of the
        event that had deleted it already, if the first request found it deleted)."""
        if key is None:
            return None

        def answer(record: IdempotencyRecord) -> EraseResult:
            position = record.position
            return EraseResult(
                record.result["id"], record.result["position"] if position is None else position
            )

        return keyed_by(principal, key, lambda record: record.fingerprint == digest, answer)

    def for_forget(
        self, principal: Principal, key: str | None, digest: str
    ) -> Keyed[ForgetResult] | None:
        """A keyed forget, answered with what the first one affected and where it landed."""
        if key is None:
            return None
        return keyed_by(
            principal,
            key,
            lambda record: record.fingerprint == digest,
            lambda record: ForgetResult(
                record.result["subject_id"], record.result["affected"], record.position
            ),
        )

    # -- answers --------------------------------------------------------------------------

    def item_at(self, principal: Principal, memory_id: str, version: int) -> MemoryItem:
        """The item as it was right after ``version``; its content only while it lives."""
        # Only the credential that made the record replays it, so it may see the item and
        # was shown this content in the first answer; the visibility check stays as a
        # guard, so that no path from a record ever shows another agent's item.
        found = self._store.get(principal.tenant_id, memory_id)
        current = require_visible(principal, found, memory_id)
        log = self._store.memory_events(principal.tenant_id, memory_id, current.subject_id)
        states = [state for _, state in versions_of(memory_id, log) if state.version <= version]
        if not states:
            raise NotFound(f"memory {memory_id!r} not found")
        content = None if _destroyed(current) else self._vault.decrypt(states[-1])
        return MemoryItem.from_state(states[-1], content)


def _destroyed(item: ItemState) -> bool:
    """Whether the item's content is gone: deleted, or past its retention window."""
    return item.status is Status.DELETED or item.content is None


def _destroyed_since(current: ItemState | None, memory_id: str, command: WriteMemory) -> bool:
    """Whether the keyed write's item has lost its content since (its subject forgotten, the
    item erased or past its retention window), so its content hash died with the key and a
    retry can no longer be compared by content. The retry (of the same item and subject)
    then gets the first answer, without content; nothing is written either way."""
    return (
        current is not None
        and _destroyed(current)
        and current.subject_id == command.subject_id
        and command.memory_id in (None, memory_id)
    )


def _made_by_write(record: IdempotencyRecord) -> bool:
    """Whether ``record`` is a write's (the only records whose result says ``created``)."""
    return "created" in record.result
