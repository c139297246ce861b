"""Fixtures for the MCP tests: a real ``gmem serve`` process and ``gmem mcp`` sessions.

The MCP client is the official SDK's ``ClientSession`` over ``stdio_client``, which starts
``gmem mcp`` as a subprocess, exactly as an MCP host would.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.support.api import Served, serve_for_clients
from tests.support.processes import GMEM, create_key, free_port, start_serve, stop, wait_ready

#: Every MCP exchange in these tests ends within this many seconds, or the test fails.
DEADLINE_SECONDS = 60


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
    process = start_serve(data_dir, log, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, log)
        yield Service(url, data_dir, log, **keys)
    finally:
        stop(process)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """The real app in this process (for in-process tool tests), as the client tests use it."""
    with ExitStack() as stack:
        yield serve_for_clients(tmp_path / "app", stack)


@asynccontextmanager
async def mcp_session(
    service: Service, api_key: str, *args: str, errlog: Path
) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with ``gmem mcp *args`` started over stdio."""
    # The SDK starts the server with a minimal environment: PYTHONPATH is passed on so the
    # code under test (a worktree's src/) is the code that serves.
    inherited = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}
    parameters = StdioServerParameters(
        command=GMEM,
        args=["mcp", *args],
        env=inherited | {"GMEM_URL": service.url, "GMEM_API_KEY": api_key},
    )
    with errlog.open("a", encoding="utf-8") as stderr:
        async with (
            stdio_client(parameters, errlog=stderr) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


@asynccontextmanager
async def agent_and_reviewer(
    service: Service, errlog: Path
) -> AsyncIterator[tuple[ClientSession, ClientSession]]:
    """Two sessions at once: the agent toolset and the reviewer toolset."""
    async with (
        mcp_session(service, service.agent_key, errlog=errlog) as agent,
        mcp_session(service, service.reviewer_key, "--reviewer", errlog=errlog) as reviewer,
    ):
        yield agent, reviewer


def text_of(result: types.CallToolResult) -> str:
    """The text content of a tool result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def structured(result: types.CallToolResult) -> dict[str, Any]:
    """The structured content of a tool result (it must have one)."""
    assert isinstance(result.structured_content, dict), result
    return result.structured_content
