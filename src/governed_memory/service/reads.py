"""Reading items: one by id, or a page of them without a query (browse, the review queue).

Every read shows an item as it is at the moment of the read: a live item past its
``expires_at`` reads as ``expired`` at once, before the expiry worker records it. Whether
a credential that may see an item may also read its content is decided in one place
(:mod:`.reading`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from governed_memory.core import access, values
from governed_memory.core.access import may_read_content
from governed_memory.core.commands import bounded_int
from governed_memory.core.model import ItemState, MemoryItem, Principal
from governed_memory.core.values import Kind, Status
from governed_memory.errors import ValidationError
from governed_memory.ports import Store
from governed_memory.records import BrowseRequest
from governed_memory.results import ItemPage, decode_cursor, encode_cursor
from governed_memory.service.reading import shown
from governed_memory.service.vault import Vault

#: The largest page a browse or the review queue returns.
MAX_PAGE = 500

#: How a browse may be ordered by (updated_at, id): ascending (the default) or descending.
ORDERS = ("oldest", "newest")


def _newest_first(order: str | None) -> bool:
    if order is not None and order not in ORDERS:
        raise ValidationError.field("order", "must be oldest or newest")
    return order == "newest"


class Reads:
    """Reads of items over one store, content opened through the vault."""

    def __init__(self, store: Store, vault: Vault) -> None:
        self._store = store
        self._vault = vault

    def get(self, principal: Principal, memory_id: str, now: datetime) -> MemoryItem:
        """One item of the caller's tenant and agents, as it is at ``now``."""
        access.require_scope(principal, values.Scope.MEMORY_READ)
        memory_id = values.memory_id(memory_id)
        found = self._store.get(principal.tenant_id, memory_id)
        state = access.require_visible(principal, found, memory_id)
        return self.shown(principal, [state], now)[0]

    def browse(
        self,
        principal: Principal,
        *,
        agent_id: str | None,
        purpose: str | None,
        subject_id: str | None,
        status: str | None,
        kind: str | None,
        limit: int,
        cursor: str | None,
        now: datetime,
        order: str | None = None,
    ) -> ItemPage:
        """A page of the caller's items (its tenant, the agents it may act for) that pass
        every filter given, in (updated_at, id) order: an item that changes while a
        client pages moves to the end, so it may be seen twice, never missed."""
        agent = None if agent_id is None else values.agent_id(agent_id)
        access.require_browse(principal, agent)
        request = BrowseRequest(
            tenant_id=principal.tenant_id,
            agents=principal.agents,
            now=now,
            limit=bounded_int(limit, "limit", 1, MAX_PAGE) + 1,
            agent_id=agent,
            purpose=None if purpose is None else values.purpose(purpose),
            subject_id=None if subject_id is None else values.subject_id(subject_id),
            status=None if status is None else values.enum_value(Status, status, "status"),
            kind=None if kind is None else values.enum_value(Kind, kind, "kind"),
            after=None if cursor is None else decode_cursor(cursor),
            newest_first=_newest_first(order),
        )
        return self.page(principal, self._store.browse(request), limit, now)

    def page(
        self, principal: Principal, rows: Sequence[ItemState], limit: int, now: datetime
    ) -> ItemPage:
        """One page of ``rows`` (read with one row more than ``limit``, to know whether
        another page follows) and the cursor of the next."""
        page, more = list(rows[:limit]), len(rows) > limit
        cursor = encode_cursor(page[-1]) if more and page else None
        return ItemPage(self.shown(principal, page, now), cursor)

    def shown(
        self, principal: Principal, states: Sequence[ItemState], now: datetime
    ) -> list[MemoryItem]:
        """``states`` as the caller sees them at ``now``, content opened where the caller
        may read it (one read of every key the items need)."""
        readable = [state for state in states if may_read_content(principal, state)]
        keys = self._vault.prefetch(
            principal.tenant_id,
            {state.subject_id for state in readable},
            [state.id for state in readable],
        )
        return [shown(principal, state, self._vault, keys, now) for state in states]
