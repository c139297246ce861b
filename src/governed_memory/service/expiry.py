"""The expiry sweep: ``memory.expired`` for every live item whose time-to-live has run out.

It runs as the system, not for a caller: no scope, no idempotency key. Several instances
may sweep at once: each expiry is a compare-and-swap on the item's version, so whichever
instance commits first wins and the others skip the item.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from governed_memory.core import lifecycle
from governed_memory.core.commands import ExpireMemory
from governed_memory.core.lifecycle import Context
from governed_memory.core.model import ItemState, Principal
from governed_memory.core.policy import TtlPolicy
from governed_memory.core.values import Trust
from governed_memory.errors import Conflict, NotFound, StoreUnavailable
from governed_memory.ports import Store
from governed_memory.records import Batch
from governed_memory.service._support import Commit, changes

log = logging.getLogger("governed_memory.service")

#: Who expires items: a system principal that holds no scope and acts for no caller.
SYSTEM = Principal("system", "system:expiry", frozenset(), Trust.UNTRUSTED)


class Expiry:
    """Sweeps one store for due items, page by page."""

    def __init__(
        self, store: Store, commit: Commit, new_id: Callable[[], str], policy: TtlPolicy
    ) -> None:
        self._store = store
        self._commit = commit
        self._new_id = new_id
        self._policy = policy

    def sweep(self, now: datetime, batch_size: int) -> int:
        """Expire every item due at ``now``; how many this sweep expired."""
        expired = 0
        while True:
            due = self._store.due_for_expiry(now, batch_size)
            progressed = sum(self._expire(item, now) for item in due)
            expired += progressed
            if len(due) < batch_size or progressed == 0:
                return expired

    def _expire(self, item: ItemState, now: datetime) -> bool:
        """Expire one due item; ``False`` if it changed meanwhile or its expiry failed."""
        ctx = Context(now=now, principal=SYSTEM, new_id=self._new_id, policy=self._policy)
        try:
            events = lifecycle.decide_expire(ctx, ExpireMemory(item.id, item.version), item)
            self._commit(Batch(item.tenant_id, events, changes(events, {item.id: item}, {})))
        except (Conflict, NotFound):
            return False  # changed or expired by someone else meanwhile
        except StoreUnavailable:
            raise
        except Exception as error:  # noqa: BLE001 - one bad item must not stop the sweep
            log.warning("expiry of one item failed", extra={"error": type(error).__name__})
            return False
        return True
