"""Review: a reviewer promotes a quarantined item (active, verified) or rejects it.

Both need the ``memory:review`` scope and the item's current version; nobody promotes what
their own principal wrote. A promotion of a correction supersedes the item it corrects, if
that one is still active; the promoted item is indexed for search. A rejection's optional
reason is sealed like content, under the item's key, so it goes when the content goes.
"""

from __future__ import annotations

from governed_memory.core import access, lifecycle
from governed_memory.core.commands import PromoteMemory, RejectMemory
from governed_memory.core.events import Event
from governed_memory.core.lifecycle import Context
from governed_memory.core.model import ItemState, MemoryItem, Principal
from governed_memory.errors import VersionConflict
from governed_memory.records import Batch
from governed_memory.service._support import UseCase, changes
from governed_memory.service.idempotency import (
    Keyed,
    fingerprint,
    parse_key,
    record_of,
)


class Review(UseCase):
    """Promotions and rejections over one store."""

    def review(
        self,
        principal: Principal,
        command: PromoteMemory | RejectMemory,
        idempotency_key: str | None,
    ) -> MemoryItem:
        """Promote or reject one item (authorized, idempotent, decided, sealed, committed)."""
        key = parse_key(idempotency_key)
        access.require_review(principal)
        digest = fingerprint(command.fingerprint())
        keyed = self._idempotency.for_review(principal, key, digest)
        return self._idempotency.once(
            keyed, lambda: self._review_once(principal, command, keyed, digest)
        )

    def _review_once(
        self,
        principal: Principal,
        command: PromoteMemory | RejectMemory,
        keyed: Keyed[MemoryItem] | None,
        digest: str,
    ) -> MemoryItem:
        tenant = principal.tenant_id
        current = self._store.get(tenant, command.memory_id)
        ctx = self._context(principal, keyed)
        plaintext: str | None = None
        if isinstance(command, PromoteMemory):
            events, known, plaintext = self._decide_promote(ctx, command, current)
        else:
            events, known = self._decide_reject(ctx, command, current), {command.memory_id: current}
        indexes = {}
        if plaintext is not None:  # the key of its vector is looked up if one is sealed
            indexes[command.memory_id] = self._indexer.entry(tenant, plaintext, None)
        rows = changes(events, known, indexes)
        item = rows[0].item
        record = record_of(keyed, digest, {"memory_id": item.id, "version": item.version})
        signature = self._indexer.signature_of(rows)
        self._commit(Batch(tenant, events, rows, record, index_signature=signature))
        content = plaintext if plaintext is not None else self._vault.decrypt(item)
        return MemoryItem.from_state(item, content)

    def _decide_promote(
        self, ctx: Context, command: PromoteMemory, current: ItemState | None
    ) -> tuple[list[Event], dict[str, ItemState | None], str | None]:
        """Promotion's events, the items they change, and the plaintext to index."""
        target = None
        if current is not None and current.supersedes_id is not None:
            target = self._store.get(current.tenant_id, current.supersedes_id)
        events = lifecycle.decide_promote(ctx, command, current, target)
        assert current is not None  # decide raised NotFound otherwise
        known: dict[str, ItemState | None] = {current.id: current}
        if target is not None:
            known[target.id] = target
        return events, known, self._vault.decrypt(current)

    def _decide_reject(
        self, ctx: Context, command: RejectMemory, current: ItemState | None
    ) -> list[Event]:
        """Rejection's events, the reason sealed (under the item's key) only once the rules
        allow the rejection."""
        events = lifecycle.decide_reject(ctx, command, current, None)
        if command.reason is None:
            return events
        assert current is not None  # decide raised NotFound otherwise
        key = self._vault.content_key(current)
        if key is None:  # its content (and key) destroyed since it was read: it has moved on
            latest = self._store.get(current.tenant_id, current.id)
            actual = current.version + 1 if latest is None else latest.version
            raise VersionConflict(current.id, command.expected_version, actual)
        return lifecycle.with_reason(events, self._vault.seal_reason(key, current, command.reason))
