"""The real ``gmem serve`` as a child process: start, wait until ready, SIGKILL or SIGTERM.

The reliability tests and the crash loop drive the service the way an operator runs it:
the installed ``gmem`` executable, configured through ``GMEM_*`` variables, on a free port
of 127.0.0.1, its JSON log in a file the tests can search afterwards.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

GMEM = str(Path(sys.executable).parent / "gmem")
ALL_SCOPES = "memory:write,memory:read,memory:review,subject:forget,audit:read,admin"


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def gmem(data_dir: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run a ``gmem`` command against ``data_dir``; its stdout (fails on a non-zero exit)."""
    done = subprocess.run(
        [GMEM, *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"gmem {args[0]} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def create_key(
    data_dir: Path,
    *,
    tenant: str = "acme",
    scopes: str = ALL_SCOPES,
    trust: str = "trusted",
    agents: str = "*",
    env: dict[str, str] | None = None,
) -> str:
    """A new API key made by ``gmem keys create --json``; the bearer token."""
    out = gmem(
        data_dir,
        *("keys", "create", "--tenant", tenant, "--agents", agents),
        *("--scopes", scopes, "--max-trust", trust, "--json"),
        env=env,
    )
    token: str = json.loads(out)["api_key"]
    return token


class ServerProcess:
    """One ``gmem serve`` over ``data_dir``, restartable, logging to ``log``."""

    def __init__(
        self,
        data_dir: Path,
        log: Path,
        env: dict[str, str] | None = None,
        *,
        open_files: int | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.log = log
        self.env = os.environ | (env or {})
        self.open_files = open_files  # RLIMIT_NOFILE of the child (soft and hard)
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Spawn the server on a new free port (it is not ready yet)."""
        assert self.process is None, "already running"
        self.port = free_port()
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                [GMEM, "serve", "--data-dir", str(self.data_dir), "--port", str(self.port)],
                stdout=sink,
                stderr=sink,
                env=self.env,
                preexec_fn=self._limit_files if self.open_files else None,  # child only: setrlimit
            )

    def _limit_files(self) -> None:
        assert self.open_files is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))

    def wait_ready(self, timeout: float = 60) -> float:
        """Seconds until ``/health/ready`` answered 200; raises if it never does."""
        assert self.process is not None
        started = time.monotonic()
        with httpx.Client(base_url=self.url, timeout=5) as client:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"gmem serve exited with {self.process.returncode}")
                try:
                    if client.get("/health/ready").status_code == 200:
                        return time.monotonic() - started
                except httpx.TransportError:
                    pass
                if time.monotonic() - started > timeout:
                    raise RuntimeError(f"gmem serve was not ready within {timeout} s")
                time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None

    def stop(self) -> int:
        """SIGTERM and wait for the graceful shutdown; the exit status."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise RuntimeError("gmem serve did not stop on SIGTERM") from None
        finally:
            self.process = None
        return status

    def __enter__(self) -> ServerProcess:
        self.start()
        self.wait_ready()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.stop()
