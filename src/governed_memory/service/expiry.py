"""The sweeps of the expiry worker: time-to-live, then retention.

- Expiry appends ``memory.expired`` for every live item whose time-to-live has run out.
- Retention appends ``memory.content_destroyed`` for every expired, rejected or superseded
  item whose retention window (per kind and status) has run out since it entered that
  status, and destroys the item's own key in the same commit: its content, every version
  of it, is gone. Items written before items had keys of their own are skipped (their
  content is sealed under the subject key; only forgetting the subject destroys it) and
  counted.

Both run as the system, not for a caller: no scope, no idempotency key. Several instances
may sweep at once: each change is a compare-and-swap on the item's version, so whichever
instance commits first wins and the others skip the item.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from governed_memory.core import lifecycle
from governed_memory.core.commands import DestroyContent, ExpireMemory
from governed_memory.core.lifecycle import Context
from governed_memory.core.model import ItemState, Principal
from governed_memory.core.policy import RetentionPolicy, TtlPolicy
from governed_memory.core.values import Trust, to_micros
from governed_memory.crypto import Keyring
from governed_memory.errors import Conflict, NotFound, StoreUnavailable
from governed_memory.ports import Store
from governed_memory.records import Batch, RetentionCursor
from governed_memory.service._support import Commit, changes
from governed_memory.service.vault import Vault

log = logging.getLogger("governed_memory.service")

#: Who expires items: a system principal that holds no scope and acts for no caller.
SYSTEM = Principal("system", "system:expiry", frozenset(), Trust.UNTRUSTED)
#: Who destroys content past its retention window, likewise.
RETENTION_SYSTEM = Principal("system", "system:retention", frozenset(), Trust.UNTRUSTED)


def _applied(commit: Commit, decide: Callable[[], Batch], doing: str) -> bool:
    """Decide and commit one system change; ``False`` if the item changed meanwhile (or
    the change failed: one bad item must not stop a sweep, and is logged)."""
    try:
        commit(decide())
    except (Conflict, NotFound):
        return False  # changed, or done by someone else, meanwhile
    except StoreUnavailable:
        raise
    except Exception as error:  # noqa: BLE001 - one bad item must not stop the sweep
        log.warning(
            "a sweep failed on one item", extra={"sweep": doing, "error": type(error).__name__}
        )
        return False
    return True


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

        def decide() -> Batch:
            ctx = Context(now=now, principal=SYSTEM, new_id=self._new_id, policy=self._policy)
            events = lifecycle.decide_expire(ctx, ExpireMemory(item.id, item.version), item)
            return Batch(item.tenant_id, events, changes(events, {item.id: item}, {}))

        return _applied(self._commit, decide, "expiry")


@dataclass(frozen=True, slots=True)
class RetentionReport:
    """What a retention sweep did: contents destroyed, and items past their window that
    it skipped because their content cannot be destroyed alone (written before items had
    keys of their own: forget their subjects to destroy it)."""

    destroyed: int
    legacy: int


class Retention:
    """Destroys the content of items past their retention window, page by page."""

    def __init__(
        self,
        store: Store,
        vault: Vault,
        commit: Commit,
        new_id: Callable[[], str],
        policy: RetentionPolicy,
    ) -> None:
        self._store = store
        self._vault = vault
        self._commit = commit
        self._new_id = new_id
        self._policy = policy

    def sweep(self, now: datetime, batch_size: int) -> RetentionReport:
        """Destroy the content of every item past its window at ``now``."""
        cutoffs = self._policy.cutoffs(now)
        destroyed = legacy = 0
        after: RetentionCursor | None = None
        while True:
            due = self._store.due_for_retention(cutoffs, batch_size, after)
            for item in due:
                if self._vault.is_legacy(item):
                    legacy += 1
                else:
                    destroyed += self._destroy(item, now)
            if len(due) < batch_size:
                break
            last = due[-1]
            after = (to_micros(last.updated_at), last.tenant_id, last.id)
        if legacy:
            log.warning(
                "retention skipped items written before items had keys of their own; "
                "forget their subjects to destroy their content",
                extra={"items": legacy},
            )
        return RetentionReport(destroyed, legacy)

    def _destroy(self, item: ItemState, now: datetime) -> bool:
        """Destroy one item's content and key; ``False`` if it changed meanwhile."""

        def decide() -> Batch:
            ctx = Context(now=now, principal=RETENTION_SYSTEM, new_id=self._new_id)
            command = DestroyContent(item.id, item.version)
            events = lifecycle.decide_destroy_content(ctx, command, item, self._policy)
            rows = changes(events, {item.id: item}, {})
            return Batch(item.tenant_id, events, rows, destroy_item_key=item.id)

        if not _applied(self._commit, decide, "retention"):
            return False
        if item.content is not None:
            self._vault.destroyed(Keyring.key_id_of(item.content))
        return True
