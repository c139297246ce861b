"""``gmem serve --workers N``: N worker processes on one listening socket.

The supervising process checks the settings and opens the store once (so a bad setting,
an unreachable database or a pending migration is one error line, reported once, and the
migrations run before any worker starts), makes the directory the workers share
(:mod:`governed_memory.http.shared`: the rate-limit windows, the expiry lock, the
metrics), then starts the workers with ``spawn``. Each worker opens its own store: its own
connections, its own group commit and its own purge of SQLite's write-ahead log.

SIGTERM or SIGINT to the supervisor is passed to every worker, each of which shuts down
gracefully (stops accepting, finishes its requests, stops its expiry loop, closes its
store); a worker still running after the grace period is killed. A worker that dies while
serving is replaced, after a delay that doubles while its replacements keep dying
(:func:`restart_delay`); one that dies before it opened its store and built its app stops
the whole server with one line, instead of being restarted forever. A worker whose
supervisor is gone (even killed with SIGKILL) shuts down as on SIGTERM: on Linux the
kernel sends it SIGTERM (``PR_SET_PDEATHSIG``), elsewhere a thread notices its parent
changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event as Ready
from pathlib import Path
from types import FrameType

from governed_memory.config import Settings
from governed_memory.errors import ConfigError
from governed_memory.http.protocol import Limits
from governed_memory.http.shared import SharedState

log = logging.getLogger("governed_memory.http")

#: How long the workers get to finish their requests after SIGTERM, beyond uvicorn's own.
GRACE_SECONDS = 40.0
PROMETHEUS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
#: A replaced worker's first restart delay, and the most it grows to.
RESTART_DELAY, RESTART_DELAY_MAX = 0.5, 30.0
#: A worker that served this long before dying counts as healthy: the delay starts over.
STABLE_SECONDS = 60.0
_PR_SET_PDEATHSIG = 1


def restart_delay(dying: int) -> float:
    """How long to wait before replacing a worker whose last ``dying`` replacements died
    soon after starting: 0.5 s, doubling, at most 30 s."""
    return float(min(RESTART_DELAY_MAX, RESTART_DELAY * 2 ** min(dying, 16)))


def _exit_with_parent(parent: int) -> None:
    """Shut down as on SIGTERM when the supervisor ``parent`` is gone, however it ended."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    if os.getppid() != parent:  # it died before the kernel was told
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=watch, name="gmem-parent-watch", daemon=True).start()


def run_worker(
    settings: Settings,
    limits: Limits,
    shared: str,
    listener: socket.socket,
    ready: Ready,
    parent: int,
) -> None:
    """One worker process: the app over its own store, served on the inherited socket;
    ``ready`` is set once the app is built (its store open); it ends with ``parent``."""
    _exit_with_parent(parent)
    from governed_memory.http.app import create_app
    from governed_memory.http.server import serve_socket
    from governed_memory.observability import configure_logging

    configure_logging(settings.log_level)
    app = create_app(settings, shared=Path(shared))
    ready.set()
    serve_socket(app, listener, limits)


@dataclass
class Supervisor:
    """Starts, watches, replaces and stops the worker processes."""

    settings: Settings
    limits: Limits
    listener: socket.socket
    shared: Path
    workers: dict[int, tuple[BaseProcess, Ready]] = field(default_factory=dict)
    stopping: bool = False
    failed: bool = False
    started: dict[int, float] = field(default_factory=dict)  # each slot's last start
    dying: dict[int, int] = field(default_factory=dict)  # its replacements that soon died
    due: dict[int, float] = field(default_factory=dict)  # when a dead slot is replaced

    def start(self, slot: int) -> None:
        context = multiprocessing.get_context("spawn")
        ready = context.Event()
        process = context.Process(
            target=run_worker,
            args=(self.settings, self.limits, str(self.shared), self.listener, ready, os.getpid()),
            name=f"gmem-worker-{slot}",
        )
        process.start()
        self.workers[slot] = (process, ready)
        self.started[slot] = time.monotonic()

    def watch(self) -> None:
        """Replace a worker that died while serving (after :func:`restart_delay`); stop all
        if one failed to start."""
        now = time.monotonic()
        for slot, (process, ready) in list(self.workers.items()):
            if process.is_alive() or self.stopping:
                continue
            if slot in self.due:
                if now >= self.due[slot]:
                    del self.due[slot]
                    self.start(slot)
                continue
            if not ready.is_set():
                log.error(
                    "worker %s failed to start (exit %s); stopping",
                    *(slot, process.exitcode),
                    extra={"worker": slot, "exit_code": process.exitcode},
                )
                self.failed = self.stopping = True
                return
            lived = now - self.started.get(slot, now)
            self.dying[slot] = 0 if lived >= STABLE_SECONDS else self.dying.get(slot, 0) + 1
            delay = restart_delay(self.dying[slot] - 1) if self.dying[slot] else 0.0
            log.warning(
                "worker %s exited (%s); starting another in %.1f s",
                *(slot, process.exitcode, delay),
                extra={"worker": slot, "exit_code": process.exitcode, "delay": delay},
            )
            self.due[slot] = now + delay

    def stop(self) -> None:
        """SIGTERM every worker, wait for them, kill the ones that do not finish."""
        self.stopping = True
        for process, _ in self.workers.values():
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        for process, _ in self.workers.values():
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()

    def run(self, count: int) -> None:
        def handle(signum: int, frame: FrameType | None) -> None:
            self.stopping = True

        previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            for slot in range(count):
                self.start(slot)
            while not self.stopping:
                alive = [p.sentinel for p, _ in self.workers.values() if p.is_alive()]
                if alive:
                    multiprocessing.connection.wait(alive, timeout=0.5)
                else:
                    time.sleep(0.1)
                self.watch()
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def serve_workers(settings: Settings, listener: socket.socket, limits: Limits) -> None:
    """Serve with ``settings.workers`` processes until SIGTERM or SIGINT."""
    shared = Path(tempfile.mkdtemp(prefix="gmem-serve-"))
    try:
        SharedState.prepare(shared)
        # Read by prometheus_client when a worker imports it: set before any starts.
        os.environ[PROMETHEUS_DIR_VARIABLE] = str(SharedState.metrics_dir(shared))
        supervisor = Supervisor(settings, limits, listener, shared)
        supervisor.run(settings.workers)
        if supervisor.failed:
            raise ConfigError("a worker process failed to start; its log is above")
    finally:
        os.environ.pop(PROMETHEUS_DIR_VARIABLE, None)
        shutil.rmtree(shared, ignore_errors=True)


__all__ = ["Supervisor", "run_worker", "serve_workers"]
