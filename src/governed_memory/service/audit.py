"""What the log tells: an item's history, the tenant's feed, the review queue (whether the
projection and the index still equal what the log makes: :mod:`.verify`). The feed
carries no content; an item's history carries only the reasons of its rejections, while
its content lives."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from governed_memory.core import access, values
from governed_memory.core.access import may_read_content
from governed_memory.core.commands import bounded_int
from governed_memory.core.events import MemoryRejected, StoredEvent, SubjectForgotten
from governed_memory.core.model import Principal
from governed_memory.core.projection import versions_of
from governed_memory.core.values import Scope
from governed_memory.ports import Store
from governed_memory.results import AuditEvent, ItemPage, decode_cursor
from governed_memory.service.reads import MAX_PAGE, Reads
from governed_memory.service.vault import Vault

#: The highest position a feed read may start below (a bound every backend can store).
MAX_POSITION = 10**18


class Audit:
    """Reads of the log and of the review queue, over one store."""

    def __init__(self, store: Store, vault: Vault, reads: Reads) -> None:
        self._store = store
        self._vault = vault
        self._reads = reads

    def history(self, principal: Principal, memory_id: str) -> list[AuditEvent]:
        """Every event that changed the item, in order; a rejection with its reason."""
        access.require_scope(principal, Scope.AUDIT_READ)
        memory_id = values.memory_id(memory_id)
        found = self._store.get(principal.tenant_id, memory_id)
        state = access.require_visible(principal, found, memory_id)
        log = self._store.memory_events(state.tenant_id, state.id, state.subject_id)
        history = []
        for stored, item in versions_of(state.id, log):
            entry = audit_event(stored, item.version)
            if isinstance(stored.event, MemoryRejected) and may_read_content(principal, state):
                reason = self._vault.open_reason(state, stored.event)
                entry = dataclasses.replace(entry, reason=reason)
            history.append(entry)
        return history

    def events_after(self, principal: Principal, after: int, limit: int) -> list[AuditEvent]:
        """The tenant's feed: content-free events with a position above ``after``."""
        access.require_feed(principal)
        bounded_int(after, "after", 0)
        bounded_int(limit, "limit", 1, 1000)
        page = self._store.events_after(principal.tenant_id, after, limit)
        return [audit_event(stored, stored.event.version) for stored in page]

    def events_before(
        self, principal: Principal, before: int | None, limit: int
    ) -> list[AuditEvent]:
        """The tenant's feed newest first: events with a position below ``before``."""
        access.require_feed(principal)
        if before is not None:
            bounded_int(before, "before", 1, MAX_POSITION)
        bounded_int(limit, "limit", 1, 1000)
        page = self._store.events_before(principal.tenant_id, before, limit)
        return [audit_event(stored, stored.event.version) for stored in page]

    def list_quarantine(
        self,
        principal: Principal,
        *,
        agent_id: str | None,
        purpose: str | None,
        limit: int,
        cursor: str | None,
        now: datetime,
    ) -> ItemPage:
        """The review queue of the caller's tenant and agents, oldest first: the items that
        can still be reviewed (an item past its expiry is expired, not in the queue)."""
        access.require_review(principal)
        if agent_id is not None:
            access.require_agent(principal, values.agent_id(agent_id))
        if purpose is not None:
            values.purpose(purpose)
        bounded_int(limit, "limit", 1, MAX_PAGE)
        after = decode_cursor(cursor) if cursor is not None else None
        rows = self._store.quarantine(
            principal.tenant_id, principal.agents, agent_id, purpose, limit + 1, after, now
        )
        return self._reads.page(principal, rows, limit, now)


def audit_event(stored: StoredEvent, version: int | None) -> AuditEvent:
    """An event as the audit feed and history show it: who, what, when; no content."""
    event = stored.event
    return AuditEvent(
        position=stored.position,
        event_id=event.event_id,
        type=event.type,
        memory_id=event.memory_id,
        version=version,
        occurred_at=event.occurred_at,
        actor=event.actor,
        subject_id=event.subject_id if isinstance(event, SubjectForgotten) else None,
    )
