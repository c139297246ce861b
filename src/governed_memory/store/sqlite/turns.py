"""The write lock of one SQLite database file, across threads and across processes.

SQLite lets one connection write at a time. Inside a process the writer's threads take
turns on a :class:`threading.Lock`. Between processes (``gmem serve --workers N``, or a
CLI command beside a server) SQLite's own lock would do, but a process that finds it taken
sleeps in SQLite's busy handler, 1, 2, 5, 10… up to 100 ms at a time, and the holder's
next transaction usually takes the lock again before the sleeper wakes: with two workers
writing, one write in a hundred waited 150 ms (``make bench``). So the processes also take
turns on an exclusive ``flock`` of a file beside the database (``gmem.sqlite3-lock``),
which the kernel hands to a waiting process the moment the holder lets go, and releases
when a process dies, however it dies. The file holds nothing; it is made on first open.

A wait stays bounded by the store's busy timeout: a process that finds the file locked
waits for it on a helper thread and gives up when the timeout passes
(``StoreUnavailable``, "locked by another process"), as SQLite's busy handler would. A lock
the helper takes after its caller gave up is let go at once. Writers that do not take
turns (the ``sqlite3`` shell) are still kept out by SQLite's lock and its busy timeout.
A store opened before ``os.fork`` must not be used on both sides of it (as SQLite asks of
its connections): parent and child would share the one open file and its lock.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from pathlib import Path
from types import TracebackType

from governed_memory.errors import StoreUnavailable

log = logging.getLogger("governed_memory.store")


def lock_path(database: Path) -> Path:
    """The file the processes writing ``database`` take turns on."""
    return database.with_name(database.name + "-lock")


class WriteTurns:
    """Held by the one thread of the host writing one database file at a time."""

    def __init__(self, database: Path | None, timeout_s: float) -> None:
        """``database`` None: no other process writes (read-only, or a test's lock)."""
        #: This process's turn alone, for what keeps out its own threads but writes
        #: nothing another process must wait for (closing the writer, an fsync).
        self.threads = threading.Lock()
        self._timeout_s = timeout_s
        self._fd = None if database is None else _open(database)
        self._waiter: _Waiter | None = None

    def __enter__(self) -> WriteTurns:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.release()

    def acquire(self) -> None:
        """Take this process's turn, then the host's; ``StoreUnavailable`` when another
        process keeps the file locked longer than the busy timeout. Interrupted (a signal
        handler raising), it holds neither."""
        self.threads.acquire()
        taken = False
        try:
            if self._fd is not None:
                self._take_file(self._fd)
                taken = True
        except BaseException:
            if taken and self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            self.threads.release()
            raise

    def release(self) -> None:
        try:
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self.threads.release()

    def _take_file(self, fd: int) -> None:
        waiter = self._waiter
        # While the helper still waits for a turn given up, the file is not tried here:
        # the lock it brings would be this open file's already, and the helper lets it go.
        if waiter is None or not waiter.waiting():
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass  # another process writes: wait to be handed the lock, within the timeout
            except OSError as error:  # supported at open; the file system changed its mind
                raise StoreUnavailable(
                    f"SQLite write failed: cannot lock its lock file ({_why(error)})"
                ) from None
        if waiter is None or not waiter.is_alive():
            waiter = self._waiter = _Waiter(fd)
        if not waiter.take(self._timeout_s):
            raise StoreUnavailable("SQLite write failed: locked by another process")

    def close(self) -> None:
        """Let go of the file (the caller holds no turn). A helper still waiting for a
        turn given up keeps its own copy of the descriptor until the kernel answers."""
        with self.threads:
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)
            if self._waiter is not None:
                self._waiter.stop()


def _why(error: OSError) -> str:
    return error.strerror or type(error).__name__


def _open(database: Path) -> int | None:
    """The lock file's descriptor, the file made with the database's mode and owner (as
    SQLite makes its ``-wal`` and ``-shm``, so a store shared by a group, or migrated by
    root for a service user, stays writable by its users); ``None`` where the file system
    cannot ``flock`` (some network and FUSE mounts): SQLite's own lock, with its busy
    handler, then keeps the processes apart alone."""
    path = lock_path(database)
    try:
        made = database.stat()
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # flock needs no write access
        else:
            os.fchmod(fd, made.st_mode & 0o666)
            if os.geteuid() == 0:
                os.fchown(fd, made.st_uid, made.st_gid)
    except OSError as error:
        raise StoreUnavailable(
            f"cannot open the SQLite database {database}: cannot open its lock file "
            f"{path.name} ({_why(error)})"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError:
        pass  # another process writes now: the file system can lock
    except OSError as error:
        os.close(fd)
        log.warning(
            "the file system of %s cannot lock %s (%s): processes writing it wait in "
            "SQLite's busy handler instead of taking turns",
            database.parent,
            path.name,
            _why(error),
        )
        return None
    return fd


class _Waiter(threading.Thread):
    """Blocks in ``flock`` on the caller's behalf, so the caller can stop waiting.

    The lock belongs to the open file, not to a thread: taken here, it is the caller's.
    One request at a time (the caller holds the process's turn); a request given up is
    marked so, and the lock it brings later is let go at once."""

    def __init__(self, fd: int) -> None:
        super().__init__(name="gmem-sqlite-write-turns", daemon=True)
        self._fd = os.dup(fd)  # the same open file: its lock is the caller's lock
        self._cond = threading.Condition()
        self._asked = False
        self._given_up = False
        self._taken = False
        self._broken = False
        self._stopping = False
        self.start()

    def take(self, timeout_s: float) -> bool:
        """Whether the lock was taken within ``timeout_s``. Interrupted, the request is
        given up, and a lock already taken for it let go."""
        with self._cond:
            self._asked, self._given_up, self._taken = True, False, False
            self._cond.notify_all()
            try:
                if self._cond.wait_for(lambda: self._taken or self._broken, timeout_s):
                    return self._taken
            except BaseException:
                self._give_up()
                raise
            self._give_up()
            return False

    def _give_up(self) -> None:
        """The request's lock is not wanted (the condition is held): one taken is let
        go, one still coming will be."""
        if self._taken:
            self._taken = False
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        else:
            self._given_up = True

    def waiting(self) -> bool:
        """Whether it is asking for the lock, or has it from a request given up and has
        not let it go yet."""
        with self._cond:
            return self._asked

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def run(self) -> None:
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._asked or self._stopping)
                    if not self._asked:
                        return
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX)
                except OSError:  # the caller gets StoreUnavailable; the next, a new helper
                    with self._cond:
                        self._asked, self._broken = False, True
                        self._cond.notify_all()
                    return
                with self._cond:
                    self._asked = False
                    if self._given_up:
                        fcntl.flock(self._fd, fcntl.LOCK_UN)
                    else:
                        self._taken = True
                        self._cond.notify_all()
        finally:
            os.close(self._fd)


__all__ = ["WriteTurns", "lock_path"]
