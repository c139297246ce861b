"""The real ``gmem serve`` process: the walkthrough over HTTP, a restart, and a content canary."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import httpx

from governed_memory.http.walkthrough import WalkthroughKeys, walkthrough
from tests.support.fakes import query as search_body
from tests.support.fakes import write_body
from tests.support.processes import create_key, serving


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
