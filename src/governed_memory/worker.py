"""The expiry worker: expiry and retention on a schedule (SPEC §7, §9).

Every ``interval`` seconds it runs, in a worker thread (the store is synchronous),
``MemoryService.expire_due`` (``memory.expired`` for items past their time-to-live) and
then ``MemoryService.apply_retention`` (``memory.content_destroyed`` for items past their
retention window). Several instances on one database are safe: each change is a
compare-and-swap on the item's version, so one instance wins and the others skip it.
Stopping is graceful: the loop stops waiting at once, and a run in progress finishes.

Given ``leader`` (``gmem serve --workers N``: whether this process holds the expiry lock
of the host), a process runs its passes only while it leads, and asks again each interval,
so exactly one worker process sweeps and another takes over when it dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable

from governed_memory.service import MemoryService

log = logging.getLogger("governed_memory.worker")


class ExpiryWorker:
    """Run expiry every ``interval`` seconds until stopped."""

    def __init__(
        self,
        service: MemoryService,
        interval: float,
        leader: Callable[[], bool] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("the expiry interval must be positive")
        self.service = service
        self.interval = interval
        self.leader = leader
        self.leading = leader is None
        self.runs = 0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the loop on the running event loop."""
        if self._task is None:
            self._stop.clear()
            self._task = asyncio.create_task(self._loop(), name="gmem-expiry-worker")

    async def stop(self) -> None:
        """Stop waiting for the next run; let a run in progress finish."""
        self._stop.set()
        if self._task is not None:
            task, self._task = self._task, None
            await task

    async def run_once(self) -> int:
        """One pass in a worker thread (expiry, then retention); how many items it expired.
        Failures are logged, never raised."""
        try:
            expired, destroyed = await asyncio.to_thread(self._sweep)
        except Exception as error:  # noqa: BLE001 - the loop must survive a failed run
            log.warning("expiry run failed", extra={"error_type": type(error).__name__})
            return 0
        finally:
            self.runs += 1
        if expired or destroyed:
            log.info("expiry run", extra={"expired": expired, "content_destroyed": destroyed})
        return expired

    def _sweep(self) -> tuple[int, int]:
        expired = self.service.expire_due()
        return expired, self.service.apply_retention().destroyed

    def _leads(self) -> bool:
        """Whether this process runs the passes now; logs the moment it takes the lead."""
        if self.leader is None:
            return True
        leads = self.leader()
        if leads and not self.leading:
            log.info("this process now runs the expiry worker", extra={"pid": os.getpid()})
        self.leading = leads
        return leads

    async def _loop(self) -> None:
        while not self._stop.is_set():
            if self._leads():
                await self.run_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.interval)


__all__ = ["ExpiryWorker"]
