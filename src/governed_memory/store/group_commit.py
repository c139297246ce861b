"""Group commit, written once for both SQL backends.

Writes go through a leader/follower queue: every caller queues its batch; one caller at a
time leads, taking every queued batch and committing them together in one transaction
(the backend's ``commit_group``, under the backend's write lock), and only then are their
callers woken. A lone writer pays one commit per batch, exactly as without grouping;
sixteen concurrent writers share fsyncs (SQLite) or round trips and WAL flushes
(PostgreSQL).

Each caller is woken once, by the leader that committed its batch or to lead the next
group itself (the oldest waiting caller leads next, so every batch is taken by the first
commit that starts after it was queued). Before, callers took turns on the write lock:
one whose batch had been committed by another leader still waited for the lock, behind
whatever later groups took it first (the lock is not fair), to find it done.

``commit_group`` must mark every :class:`Pending` of the group with its result or its
error; a batch that fails must fail alone (each backend's ``batch`` module says how).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from typing import Any

from governed_memory.core.events import StoredEvent
from governed_memory.errors import StoreUnavailable
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
    # Set once its group has committed (``done``), or when it is its caller's turn to lead.
    woken: threading.Event = field(default_factory=threading.Event)


class GroupCommit:
    """The queue of batches waiting for the write lock, and their leader's commit."""

    def __init__(
        self,
        commit_group: Callable[[list[Pending]], None],
        lock: AbstractContextManager[Any] | None = None,
    ) -> None:
        self._commit_group = commit_group
        # The backend's write lock when it has other writers to keep out (SQLite's admin
        # transactions on the one writer connection, a close, other processes).
        self.lock: AbstractContextManager[Any] = lock if lock is not None else threading.Lock()
        self._queue_lock = threading.Lock()
        self._queue: list[Pending] = []
        self._leading = False  # a caller is leading: the others wait to be woken

    def commit(self, batch: Batch) -> list[StoredEvent]:
        """Commit ``batch`` (perhaps with others'); its stored events, or its error."""
        pending = Pending(batch)
        with self._queue_lock:
            self._queue.append(pending)
            lead = not self._leading
            self._leading = True
        try:
            if not lead:
                pending.woken.wait()
            if not pending.done:  # its turn: it commits what has queued by then, its own too
                self._lead(pending)
        except BaseException:  # interrupted (Ctrl-C in a writing main thread): not waited for
            self._abandon(pending)
            raise
        if pending.error is not None:
            raise pending.error
        return pending.result

    def _lead(self, own: Pending) -> None:
        """Take the write lock, then commit every batch queued by then (``own`` included)
        in one group; wake their callers and hand the lead to the oldest caller still
        waiting, if any."""
        group: list[Pending] = []
        try:
            with ExitStack() as held:
                try:
                    held.enter_context(self.lock)
                except StoreUnavailable as error:  # another process kept it past the timeout
                    # Every batch queued meanwhile fails with it, rather than each caller
                    # leading in turn and waiting a timeout of its own.
                    with self._queue_lock:
                        group, self._queue = self._queue, []
                    for pending in group:
                        pending.error, pending.done = error, True
                    return
                with self._queue_lock:
                    group, self._queue = self._queue, []
                self._commit_group(group)
        finally:  # the callers are woken whatever happened, and the lead handed on
            for pending in group:
                if not pending.done:  # the backend marks each; a batch it could not mark
                    pending.error = StoreUnavailable("the write's transaction did not finish")
                    pending.done = True
            with self._queue_lock:
                if not group:  # interrupted before taking the queue: ``own`` leaves it
                    self._queue.remove(own)
                following = self._queue[0] if self._queue else None
                self._leading = following is not None
            if following is not None:
                following.woken.set()
            for pending in group:
                pending.woken.set()

    def _abandon(self, pending: Pending) -> None:
        """Take ``pending`` out of the queue if it is still there (a group that took it
        commits it, its caller gone), and hand the lead on if it had been handed to it."""
        with self._queue_lock:
            if pending not in self._queue:
                return
            self._queue.remove(pending)
            if not pending.woken.is_set():
                return
            following = self._queue[0] if self._queue else None
            self._leading = following is not None
        if following is not None:
            following.woken.set()


__all__ = ["GroupCommit", "Pending"]
