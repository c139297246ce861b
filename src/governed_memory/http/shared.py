"""What the worker processes of one ``gmem serve --workers N`` share, in a directory of
their own that the supervising process makes and removes (:mod:`.workers`).

- **The rate limit.** :class:`SharedWindowLimiter` keeps each key's fixed window in one
  SQLite file (``rate-limit.sqlite3``): one ``INSERT … ON CONFLICT DO UPDATE … RETURNING``
  per request counts the request and reads the count in a single atomic statement, so a
  key gets ``limit`` requests per window across all the workers, not ``N × limit``. The
  workers take turns on an exclusive ``flock`` of ``rate-limit.lock`` around that
  statement: a waiting worker is woken the moment the lock is free, where SQLite's own
  busy handler would sleep a millisecond or more (measured: a 100–400 ms worst case with
  four processes counting). The file is a counter, not a record: WAL,
  ``synchronous=OFF`` (no fsync on the request path; a crash of the machine forgets the
  current windows, which only lets a key start afresh).
- **The expiry worker's leader.** :class:`LeaderLock` is an exclusive ``flock`` on
  ``expiry.lock``: the worker holding it runs the expiry loop, the others skip their runs
  and try the lock again each interval, so when the leader dies (the kernel releases its
  lock) another takes over within one interval.
- **The metrics.** ``metrics/`` is ``PROMETHEUS_MULTIPROC_DIR``: each worker writes its
  samples there and ``/metrics`` sums every worker's (:mod:`governed_memory.observability`).

The directory is shared by the workers of one host; instances on other hosts keep their
own (docs/operations.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from governed_memory.http.limits import FixedWindowLimiter, RateDecision

RATE_LIMIT_FILE = "rate-limit.sqlite3"
LEADER_FILE = "expiry.lock"
METRICS_DIR = "metrics"
#: How long a request waits for another worker's count to commit (microseconds, usually).
BUSY_TIMEOUT_MS = 2_000
#: Every this many counts, windows that have ended are deleted.
PRUNE_EVERY = 10_000

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS windows ("
    " key TEXT PRIMARY KEY, win INTEGER NOT NULL, count INTEGER NOT NULL"
    ") WITHOUT ROWID"
)
_COUNT = (
    "INSERT INTO windows (key, win, count) VALUES (?, ?, 1)"
    " ON CONFLICT (key) DO UPDATE SET"
    # The window never moves back: a request stamped with an older window (its clock read
    # before another worker's newer one) counts in the newer window, never resets it.
    " count = CASE WHEN excluded.win > win THEN 1 ELSE count + 1 END,"
    " win = max(win, excluded.win)"
    " RETURNING count"
)


class SharedWindowLimiter(FixedWindowLimiter):
    """:class:`FixedWindowLimiter`'s windows, counted in a file every worker shares."""

    def __init__(
        self, path: Path, limit: int, window: int, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(limit, window, clock)
        self._conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = OFF")
        self._conn.execute(_SCHEMA)
        self._turn = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        self._counted = 0

    def hit(self, key: str) -> RateDecision:
        with self._lock:
            fcntl.flock(self._turn, fcntl.LOCK_EX)
            try:  # the clock is read in turn, so the windows the workers stamp only grow
                now = self._clock()
                window = int(now // self.window)
                reset = max(1, math.ceil((window + 1) * self.window - now))
                (count,) = self._conn.execute(_COUNT, (key, window)).fetchone()
                self._counted += 1
                if self._counted % PRUNE_EVERY == 0:
                    self._conn.execute("DELETE FROM windows WHERE win < ?", (window,))
            finally:
                fcntl.flock(self._turn, fcntl.LOCK_UN)
        allowed = count <= self.limit
        return RateDecision(allowed, self.limit, max(0, self.limit - count), reset)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            os.close(self._turn)


class LeaderLock:
    """An exclusive lock on a file, held by at most one process of the host at a time."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    def held(self) -> bool:
        """Whether this process holds the lock, taking it if it is free."""
        if self._fd is not None:
            return True
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


class SharedState:
    """The shared directory of one ``gmem serve --workers N``, as one worker opens it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.leader = LeaderLock(directory / LEADER_FILE)
        self._limiters: list[SharedWindowLimiter] = []
        self._guard = threading.Lock()

    @staticmethod
    def prepare(directory: Path) -> None:
        """Make the directory's parts, once, in the supervising process."""
        (directory / METRICS_DIR).mkdir(mode=0o700, exist_ok=True)
        SharedWindowLimiter(directory / RATE_LIMIT_FILE, 1, 1).close()

    @staticmethod
    def metrics_dir(directory: Path) -> Path:
        return directory / METRICS_DIR

    def limiter(self, limit: int, window: int) -> SharedWindowLimiter:
        with self._guard:
            made = SharedWindowLimiter(self.directory / RATE_LIMIT_FILE, limit, window)
            self._limiters.append(made)
        return made

    def close(self) -> None:
        """Release the leader lock and close the limiter's file."""
        self.leader.release()
        with self._guard:
            for made in self._limiters:
                made.close()
            self._limiters.clear()


__all__ = ["LeaderLock", "SharedState", "SharedWindowLimiter"]
