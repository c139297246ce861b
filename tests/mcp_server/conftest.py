"""Fixtures for the MCP tests: a real ``gmem serve`` process and ``gmem mcp`` sessions.

The MCP client is the official SDK's ``ClientSession`` over ``stdio_client``, which starts
``gmem mcp`` as a subprocess, exactly as an MCP host would.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.client.conftest import Served, serve_app

GMEM = str(Path(sys.executable).parent / "gmem")
#: Every MCP exchange in these tests ends within this many seconds, or the test fails.
DEADLINE_SECONDS = 60


def gmem(data_dir: Path, *args: str) -> str:
    """Run a ``gmem`` command against ``data_dir``; return its stdout, fail on error."""
    done = subprocess.run(
        [GMEM, *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def create_key(data_dir: Path, scopes: str, trust: str, agents: str = "*") -> str:
    """A new key of tenant acme, made by ``gmem keys create --json``."""
    out = gmem(
        data_dir,
        *("keys", "create", "--tenant", "acme", "--agents", agents),
        *("--scopes", scopes, "--max-trust", trust, "--json"),
    )
    token: str = json.loads(out)["api_key"]
    return token


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_ready(url: str, process: subprocess.Popen[bytes], log: Path, path: str) -> None:
    """Poll ``url + path`` until it answers, the process dies, or 30 s pass."""
    deadline = time.monotonic() + 30
    with httpx.Client(base_url=url, timeout=5) as client:
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if client.get(path).status_code < 500:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"{path} did not answer in time"
            time.sleep(0.05)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then wait; kill if it does not stop."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:  # pragma: no cover - reported by the assert
        process.kill()
        process.wait()
        pytest.fail(f"{process.args} did not stop on SIGTERM")


@dataclass(frozen=True)
class Service:
    """A running ``gmem serve`` and the keys made for the MCP tests."""

    url: str
    data_dir: Path
    log: Path
    agent_key: str
    reviewer_key: str
    operator_key: str


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """``gmem serve`` on a free port over a fresh data directory, with three keys (tests keep
    apart by subject)."""
    root = tmp_path_factory.mktemp("gmem")
    data_dir, log = root / "data", root / "serve.log"
    keys = {
        "agent_key": create_key(
            data_dir, "memory:write,memory:read", "untrusted", agents="support-bot"
        ),
        "reviewer_key": create_key(data_dir, "memory:review,memory:read", "untrusted"),
        "operator_key": create_key(
            data_dir, "memory:write,memory:read,audit:read", "trusted", agents="support-bot"
        ),
    }
    port = free_port()
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [GMEM, "serve", "--data-dir", str(data_dir), "--port", str(port)],
            stdout=sink,
            stderr=sink,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url, process, log, "/health/ready")
        yield Service(url, data_dir, log, **keys)
    finally:
        stop(process)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """The real app in this process (for in-process tool tests), as the client tests use it."""
    with ExitStack() as stack:
        yield serve_app(tmp_path / "app", stack)


@asynccontextmanager
async def mcp_session(
    service: Service, api_key: str, *args: str, errlog: Path
) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with ``gmem mcp *args`` started over stdio."""
    parameters = StdioServerParameters(
        command=GMEM,
        args=["mcp", *args],
        env={"GMEM_URL": service.url, "GMEM_API_KEY": api_key},
    )
    with errlog.open("a", encoding="utf-8") as stderr:
        async with (
            stdio_client(parameters, errlog=stderr) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def text_of(result: types.CallToolResult) -> str:
    """The text content of a tool result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def structured(result: types.CallToolResult) -> dict[str, Any]:
    """The structured content of a tool result (it must have one)."""
    assert isinstance(result.structured_content, dict), result
    return result.structured_content
