"""``gmem mcp`` as a command: one clear line when it cannot start, and the HTTP transport."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from governed_memory.mcp_server import SDK_MISSING
from tests.mcp_server.conftest import DEADLINE_SECONDS, Service, structured
from tests.support.processes import GMEM, create_key, free_port, stop, wait_ready


def gmem_mcp(
    *args: str, env: dict[str, str], python: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``gmem mcp`` (or a Python snippet) to its end with ``env`` and no stdin."""
    command = [sys.executable, "-c", python] if python else [GMEM, "mcp", *args]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    return subprocess.run(
        command,
        env=clean | env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_without_an_api_key_it_says_which_variable_to_set() -> None:
    """No GMEM_API_KEY: exit 1 and one line on stderr naming it."""
    done = gmem_mcp(env={})
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "gmem: error: set GMEM_API_KEY to the API key the MCP tools act with (or --api-key)"
    ]
    assert done.stdout == ""


def test_a_bad_trust_is_refused() -> None:
    """GMEM_MCP_TRUST=verified is refused: only untrusted and trusted may be claimed."""
    done = gmem_mcp(env={"GMEM_API_KEY": "k", "GMEM_MCP_TRUST": "verified"})
    assert done.returncode == 1
    assert "GMEM_MCP_TRUST" in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_a_reviewer_server_needs_a_review_key(service: Service) -> None:
    """--reviewer with an agent key stops at start with one line naming memory:review."""
    done = gmem_mcp("--reviewer", env={"GMEM_URL": service.url, "GMEM_API_KEY": service.agent_key})
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("gmem: error: --reviewer needs a key with memory:review: ")


@pytest.mark.parametrize("key", ["unknown", "review-only"])
def test_an_agent_server_checks_its_key_at_start(service: Service, key: str) -> None:
    """An unknown key, or one that cannot read, stops the agent server at start with one
    line, as --reviewer does, instead of starting and failing every call."""
    token = {
        "unknown": "gmem_0123456789abcdef_" + "A" * 43,
        "review-only": create_key(service.data_dir, "memory:review", "untrusted"),
    }[key]
    done = gmem_mcp(env={"GMEM_URL": service.url, "GMEM_API_KEY": token})
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "gmem: error: the agent tools need a key with memory:read and memory:write: "
    )
    assert ("unknown or does not match" in lines[0]) is (key == "unknown")
    assert ("lacks the scope memory:read" in lines[0]) is (key == "review-only")


def test_without_the_sdk_it_says_how_to_install_it() -> None:
    """Where the mcp package is missing, gmem mcp says how to install the extra from a
    checkout (the package is not on PyPI)."""
    snippet = (
        "import sys; sys.modules['mcp'] = None\n"
        "from governed_memory.cli import main\n"
        "sys.exit(main(['mcp']))\n"
    )
    done = gmem_mcp(env={"GMEM_API_KEY": "k"}, python=snippet)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"gmem: error: {SDK_MISSING}"]
    assert SDK_MISSING.endswith("run .venv/bin/pip install -e '.[mcp]'")


def test_streamable_http_serves_the_same_tools(service: Service, tmp_path: Path) -> None:
    """``gmem mcp --http`` answers the official client's streamable HTTP transport."""
    port = free_port()
    log = tmp_path / "mcp-http.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    env |= {"GMEM_URL": service.url, "GMEM_API_KEY": service.agent_key}
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [GMEM, "mcp", "--http", "--port", str(port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
        )
    url = f"http://127.0.0.1:{port}"

    async def main() -> tuple[set[str], dict[str, object]]:
        with anyio.fail_after(DEADLINE_SECONDS):
            async with (
                streamable_http_client(f"{url}/mcp") as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                names = {tool.name for tool in (await session.list_tools()).tools}
                recalled = await session.call_tool(
                    "recall",
                    {"agent_id": "support-bot", "purpose": "support", "query": "anything"},
                )
                return names, structured(recalled)

    try:
        wait_ready(url, process, log, "/mcp")
        names, recalled = anyio.run(main)
    finally:
        stop(process)
    assert names == {"remember", "recall", "correct"}
    assert "items" in recalled
