"""The real ``gmem serve`` process: the walkthrough over HTTP, a restart, and a content canary."""

from __future__ import annotations

import json
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from governed_memory.http.walkthrough import WalkthroughKeys, walkthrough
from tests.http.conftest import search_body, write_body

GMEM = str(Path(sys.executable).parent / "gmem")


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
    """A new key of tenant acme, created by ``gmem keys create --json``."""
    out = gmem(
        data_dir,
        *("keys", "create", "--tenant", "acme", "--agents", agents),
        *("--scopes", scopes, "--max-trust", trust, "--json"),
    )
    created = json.loads(out)
    assert created["tenant_id"] == "acme"
    token: str = created["api_key"]
    return token


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serving(data_dir: Path, log: Path, port: int | None = None) -> Iterator[httpx.Client]:
    """``gmem serve`` on a free port, logging to ``log``; SIGTERM and wait on exit."""
    port = port or free_port()
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [GMEM, "serve", "--data-dir", str(data_dir), "--port", str(port)],
            stdout=sink,
            stderr=sink,
        )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if client.get("/health/ready").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "gmem serve did not become ready"
            time.sleep(0.05)
        yield client
    finally:
        client.close()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - reported by the assert
            process.kill()
            process.wait()
            pytest.fail("gmem serve did not stop on SIGTERM")


def snapshot(client: httpx.Client, token: str, ids: list[str]) -> dict[str, Any]:
    """What a client can see of the store: the items and the audit feed."""
    headers = {"Authorization": f"Bearer {token}"}
    return {
        "items": [client.get(f"/v1/memories/{i}", headers=headers).json() for i in ids],
        "events": client.get("/v1/events", headers=headers).json(),
    }


def test_walkthrough_over_the_real_server_survives_a_restart(tmp_path: Path) -> None:
    """The walkthrough passes over HTTP, and after SIGTERM and a restart the state is the same."""
    data, log = tmp_path / "data", tmp_path / "server.log"
    keys = WalkthroughKeys(
        operator=create_key(data, "memory:write,memory:read,subject:forget", "trusted"),
        agent=create_key(data, "memory:write,memory:read", "untrusted", agents="support-bot"),
        reviewer=create_key(data, "memory:review", "untrusted"),
    )
    auditor = create_key(data, "memory:read,audit:read", "untrusted")
    lines: list[str] = []
    with serving(data, log) as client:
        result = walkthrough(client, keys, lines.append)
        ids = [result.trusted["id"], result.untrusted["id"]]
        before = snapshot(client, auditor, ids)
    assert len(lines) == 8
    assert [item["status"] for item in before["items"]] == ["deleted", "deleted"]
    assert [e["type"] for e in before["events"]["events"]][-1] == "subject.forgotten"
    with serving(data, log) as client:
        assert snapshot(client, auditor, ids) == before
        again = walkthrough(client, keys, lines.append)
        assert again.found == [1, 2, 0]
    logged = log.read_text()
    assert logged.count("Application shutdown complete") == 2  # SIGTERM: graceful, twice
    assert "Traceback" not in logged


def test_a_content_canary_never_reaches_logs_metrics_or_errors(tmp_path: Path) -> None:
    """Content written, searched and sent in failing requests never shows outside the items."""
    canary = "canary" + secrets.token_hex(8)
    data, log = tmp_path / "data", tmp_path / "server.log"
    token = create_key(data, "memory:write,memory:read,memory:review,audit:read", "trusted")
    headers = {"Authorization": f"Bearer {token}"}
    content = f"The customer's locker code is {canary}."
    error_bodies: list[str] = []
    with serving(data, log) as client:
        put = client.put("/v1/memories/m-1", json=write_body(content=content), headers=headers)
        assert put.status_code == 201
        found = client.post("/v1/search", json=search_body(query=canary), headers=headers)
        assert canary in found.text  # the canary is really there, and findable
        failing = [
            client.put("/v1/memories/m-1", json=write_body(content=content), headers=headers),
            client.post(
                "/v1/memories",
                json=write_body(content=content, agent_id=f"bad {canary}"),
                headers=headers,
            ),
            client.post(
                "/v1/memories",
                json=write_body(content=content + "\x00"),
                headers=headers,
            ),
            client.post(
                "/v1/memories",
                json=write_body(content=content * 300),
                headers=headers,
            ),
            client.post(
                "/v1/memories",
                content=f'{{"content": "{canary}"'.encode(),
                headers=headers | {"Content-Type": "application/json"},
            ),
            client.post("/v1/search", json=search_body(query=canary, limit=0), headers=headers),
            client.post(
                "/v1/memories",
                json=write_body(content=content),
                headers={"Authorization": f"Bearer gmem_{canary}"},
            ),
        ]
        for key in ("k-1", "k-1"):
            failing.append(
                client.post(
                    "/v1/memories",
                    json=write_body(content=f"{content} {key}" + secrets.token_hex(2)),
                    headers=headers | {"Idempotency-Key": key},
                )
            )
        error_bodies = [r.text for r in failing if r.status_code >= 400]
        metrics = client.get("/metrics").text
    assert len(error_bodies) == len(failing) - 1  # all but the first idempotent write failed
    for body in error_bodies:
        assert canary not in body
    assert canary not in metrics
    logged = log.read_text()
    assert '"route": "/v1/memories/{id}"' in logged  # the access log was written
    assert canary not in logged
