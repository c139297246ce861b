"""The expiry worker: appends ``memory.expired`` events on a schedule (SPEC §9).

It runs ``MemoryService.expire_due`` in a worker thread (the store is synchronous) every
``interval`` seconds. Several instances on one database are safe: each expiry is a
compare-and-swap on the item's version, so one instance wins and the others skip it.
Stopping is graceful: the loop stops waiting at once, and a run in progress finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from governed_memory.service import MemoryService

log = logging.getLogger("governed_memory.worker")


class ExpiryWorker:
    """Run expiry every ``interval`` seconds until stopped."""

    def __init__(self, service: MemoryService, interval: float) -> None:
        if interval <= 0:
            raise ValueError("the expiry interval must be positive")
        self.service = service
        self.interval = interval
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
        """One expiry pass in a worker thread; failures are logged, never raised."""
        try:
            expired = await asyncio.to_thread(self.service.expire_due)
        except Exception as error:  # noqa: BLE001 - the loop must survive a failed run
            log.warning("expiry run failed", extra={"error_type": type(error).__name__})
            return 0
        finally:
            self.runs += 1
        if expired:
            log.info("expiry run", extra={"expired": expired})
        return expired

    async def _loop(self) -> None:
        while not self._stop.is_set():
            await self.run_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.interval)


__all__ = ["ExpiryWorker"]
