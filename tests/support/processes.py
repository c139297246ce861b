"""The installed ``gmem`` as a child process: run a command, serve, wait until ready, stop.

Tests that drive ``gmem`` the way an operator runs it use these: the executable next to
the test interpreter, a free port of 127.0.0.1, a log file to search afterwards, SIGTERM
to stop (SIGKILL only when a test means a crash).
"""

from __future__ import annotations

import json
import resource
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

GMEM = str(Path(sys.executable).parent / "gmem")
ALL_SCOPES = "memory:write,memory:read,memory:review,subject:forget,audit:read"
STOP_SECONDS = 40
#: Runs ``argv[1:]`` (output discarded) from a process of its own and prints its exit
#: status and peak RSS in KiB: see :func:`peak_rss_mib`.
_PEAK_RSS = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def gmem(
    data_dir: Path, *args: str, env: Mapping[str, str] | None = None, timeout: float = 300
) -> str:
    """Run a ``gmem`` command against ``data_dir``; its stdout (raises on a non-zero exit)."""
    done = subprocess.run(
        [GMEM, *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"gmem {args[0]} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def peak_rss_mib(command: list[str], env: Mapping[str, str] | None = None) -> float:
    """The peak RSS (MiB) of ``command``, which must succeed.

    Linux carries ``ru_maxrss`` across ``fork`` and ``exec``: a child started from the
    test process reports the test process's own peak when that is higher (a test that
    made a large store in-process first measures that store, not the command). So a
    small process of its own starts the command and reads its peak.
    """
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *command],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    status, kib = done.stdout.split()
    assert status == "0", f"{command[:2]} exited with {status}"
    return int(kib) / 1024


def create_key(
    data_dir: Path,
    scopes: str = ALL_SCOPES,
    trust: str = "trusted",
    agents: str = "*",
    *,
    tenant: str = "acme",
    principal: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """A new API key made by ``gmem keys create --json``; the bearer token. Each key is of
    a principal of its own unless ``principal`` names one."""
    principal = principal or f"principal-{secrets.token_hex(4)}"
    out = gmem(
        data_dir,
        *("keys", "create", "--tenant", tenant, "--principal", principal),
        *("--agents", agents, "--scopes", scopes, "--max-trust", trust, "--json"),
        env=env,
    )
    created = json.loads(out)
    assert created["tenant_id"] == tenant
    token: str = created["api_key"]
    return token


def start_serve(
    data_dir: Path,
    log: Path,
    port: int,
    env: Mapping[str, str] | None = None,
    *,
    open_files: int | None = None,
    new_session: bool = False,
) -> subprocess.Popen[bytes]:
    """Spawn ``gmem serve`` over ``data_dir`` on ``port``, logging to ``log`` (not ready yet);
    ``open_files`` sets the child's RLIMIT_NOFILE (soft and hard); ``new_session`` makes it
    the leader of a process group of its own (with its workers: one ``killpg`` ends all)."""

    def limit_files() -> None:  # runs in the child, before exec
        assert open_files is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    with log.open("ab") as sink:
        return subprocess.Popen(
            [GMEM, "serve", "--data-dir", str(data_dir), "--port", str(port)],
            stdout=sink,
            stderr=sink,
            env=env,
            preexec_fn=limit_files if open_files else None,
            start_new_session=new_session,
        )


def wait_ready(
    url: str,
    process: subprocess.Popen[bytes],
    log: Path,
    path: str = "/health/ready",
    timeout: float = 60,
) -> float:
    """Seconds until ``url + path`` answered without a 5xx; raises if the process dies or
    ``timeout`` passes first."""
    started = time.monotonic()
    with httpx.Client(base_url=url, timeout=5) as client:
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"{process.args[1]} exited with {process.returncode}: {_tail(log)}"
                )
            try:
                if client.get(path).status_code < 500:
                    return time.monotonic() - started
            except httpx.TransportError:
                pass
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"{path} did not answer within {timeout} s: {_tail(log)}")
            time.sleep(0.02)


def stop(process: subprocess.Popen[bytes], timeout: float = STOP_SECONDS) -> int:
    """SIGTERM and wait for the graceful shutdown; the exit status (raises if it hangs)."""
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise RuntimeError(f"{process.args[1]} did not stop on SIGTERM") from None


@contextmanager
def serving(
    data_dir: Path,
    log: Path,
    *,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[httpx.Client]:
    """``gmem serve`` on a free port until the block ends; a client of it."""
    port = port or free_port()
    process = start_serve(data_dir, log, port, env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, process, log)
        with httpx.Client(base_url=url, timeout=30) as client:
            yield client
    finally:
        stop(process)


def _tail(log: Path, lines: int = 20) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""


__all__ = [
    "ALL_SCOPES",
    "GMEM",
    "create_key",
    "free_port",
    "gmem",
    "serving",
    "start_serve",
    "stop",
    "wait_ready",
]
