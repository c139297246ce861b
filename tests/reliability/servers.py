"""The real ``gmem serve`` as a restartable child process: start, wait, SIGKILL or SIGTERM.

The reliability tests and the crash loop drive the service the way an operator runs it:
the installed ``gmem`` executable, configured through ``GMEM_*`` variables, on a free port
of 127.0.0.1, its JSON log in a file the tests can search afterwards. The process helpers
themselves are :mod:`tests.support.processes`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.support.processes import (
    create_key,
    free_port,
    gmem,
    start_serve,
    stop,
    wait_ready,
)


class ServerProcess:
    """One ``gmem serve`` over ``data_dir``, restartable, logging to ``log``."""

    def __init__(
        self,
        data_dir: Path,
        log: Path,
        env: dict[str, str] | None = None,
        *,
        open_files: int | None = None,
        group: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.log = log
        self.env = os.environ | (env or {})
        self.open_files = open_files  # RLIMIT_NOFILE of the child (soft and hard)
        # A process group of its own (``gmem serve --workers N``): a kill ends every process.
        self.group = group
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Spawn the server on a new free port (it is not ready yet)."""
        assert self.process is None, "already running"
        self.port = free_port()
        self.process = start_serve(
            self.data_dir,
            self.log,
            self.port,
            self.env,
            open_files=self.open_files,
            new_session=self.group,
        )

    def wait_ready(self, timeout: float = 60) -> float:
        """Seconds until ``/health/ready`` answered; raises if it never does."""
        assert self.process is not None
        return wait_ready(self.url, self.process, self.log, timeout=timeout)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash; of the whole process group (the
        supervisor and its workers at once) when the server has one."""
        if self.process is None:
            return
        if self.group:
            os.killpg(self.process.pid, signal.SIGKILL)
        else:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        if self.group:
            wait_group_gone(self.process.pid)
        self.process = None

    def processes(self) -> list[int]:
        """The server's live processes: the one started, or every one of its group."""
        if self.process is None:
            return []
        if not self.group:
            return [self.process.pid] if self.process.poll() is None else []
        return _group_members(self.process.pid)

    def wait_started(self, database: Path, processes: int = 1, timeout: float = 60) -> None:
        """Wait until start-up has begun its work: ``processes`` of the server live (its
        workers forked) and one of them holding ``database`` open. Raises if the server
        exits first or the time runs out."""
        assert self.process is not None
        target = str(database.resolve())
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                tail = self.log.read_text(errors="replace").splitlines()[-3:]
                raise RuntimeError(f"the server exited while starting; its log ends {tail}")
            live = self.processes()
            if len(live) >= processes and any(_holds(pid, target) for pid in live):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start its work in {timeout} s")
            time.sleep(0.005)

    def stop(self) -> int:
        """SIGTERM and wait for the graceful shutdown; the exit status."""
        assert self.process is not None
        process, self.process = self.process, None
        return stop(process)

    def __enter__(self) -> ServerProcess:
        self.start()
        self.wait_ready()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.stop()


__all__ = ["ServerProcess", "create_key", "gmem"]


def wait_group_gone(group: int, timeout: float = 30) -> None:
    """Wait until no live process (zombies aside: they hold no file) is in ``group``."""
    deadline = time.monotonic() + timeout
    while _group_members(group):
        assert time.monotonic() < deadline, f"process group {group} outlived its SIGKILL"
        time.sleep(0.01)


def _holds(pid: int, target: str) -> bool:
    """Whether process ``pid`` has the file at ``target`` open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone, or not ours to read
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
        except OSError:  # closed meanwhile
            continue
    return False


def _group_members(group: int) -> list[int]:
    """The live processes (zombies aside: they hold no file) of process group ``group``."""
    return [int(entry.name) for entry in Path("/proc").iterdir() if _in_group(entry, group)]


def _in_group(entry: Path, group: int) -> bool:
    if not entry.name.isdigit():
        return False
    try:
        fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] != "Z" and int(fields[2]) == group  # state, ppid, pgrp
