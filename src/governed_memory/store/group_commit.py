"""Group commit, written once for both SQL backends.

Writes go through a leader/follower queue: every caller queues its batch; whoever then
holds the write lock takes every queued batch and commits them together in one
transaction (the backend's ``commit_group``), and only then are their callers woken. A
lone writer pays one commit per batch, exactly as without grouping; sixteen concurrent
writers share fsyncs (SQLite) or round trips and WAL flushes (PostgreSQL). A caller
whose batch was taken by another leader finds it done once it gets the lock itself.

``commit_group`` must mark every :class:`Pending` of the group with its result or its
error; a batch that fails must fail alone (each backend's ``batch`` module says how).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from governed_memory.core.events import StoredEvent
from governed_memory.records import Batch


@dataclass(eq=False)
class Pending:
    """One caller's batch in the queue, and what became of it."""

    batch: Batch
    result: list[StoredEvent] = field(default_factory=list)
    error: BaseException | None = None
    # Its transaction committed: a later failure of the group must not fail it too.
    committed: bool = False
    done: bool = False


class GroupCommit:
    """The queue of batches waiting for the write lock, and their leader's commit."""

    def __init__(
        self,
        commit_group: Callable[[list[Pending]], None],
        lock: threading.Lock | None = None,
    ) -> None:
        self._commit_group = commit_group
        # The backend's write lock when it has other writers to keep out (SQLite's admin
        # transactions on the one writer connection, a close).
        self.lock = lock if lock is not None else threading.Lock()
        self._queue_lock = threading.Lock()
        self._queue: list[Pending] = []

    def commit(self, batch: Batch) -> list[StoredEvent]:
        """Commit ``batch`` (perhaps with others'); its stored events, or its error."""
        pending = Pending(batch)
        with self._queue_lock:
            self._queue.append(pending)
        with self.lock:
            if not pending.done:
                with self._queue_lock:
                    group, self._queue = self._queue, []
                self._commit_group(group)
        if pending.error is not None:
            raise pending.error
        return pending.result


__all__ = ["GroupCommit", "Pending"]
