"""Two real ``gmem serve`` processes on one PostgreSQL database (SPEC §10, §12).

Each test starts two servers whose ``GMEM_DATABASE_URL`` points at one fresh schema (through
the connection's ``search_path``) and whose master key is the same, as a deployment behind
a load balancer would run them.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.conftest import postgres_dsn
from tests.support.fakes import body as write_body

GMEM = str(Path(sys.executable).parent / "gmem")


class Deployment:
    """Everything two instances share: the database URL, the master key, a data dir."""

    def __init__(self, tmp_path: Path, database_url: str) -> None:
        self.tmp_path = tmp_path
        self.env = os.environ | {
            "GMEM_DATABASE_URL": database_url,
            "GMEM_MASTER_KEY": base64.b64encode(secrets.token_bytes(32)).decode("ascii"),
            "GMEM_EXPIRY_INTERVAL_SECONDS": "0.5",
        }

    def gmem(self, *args: str) -> str:
        """Run a ``gmem`` command against the shared database; its stdout."""
        done = subprocess.run(
            [GMEM, *args, "--data-dir", str(self.tmp_path / "cli")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=self.env,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def key(self) -> dict[str, str]:
        """Authorization headers of a new all-scopes key of tenant acme."""
        created = json.loads(
            self.gmem(
                *("keys", "create", "--tenant", "acme", "--agents", "*"),
                *("--scopes", "memory:write,memory:read,audit:read", "--max-trust", "trusted"),
                "--json",
            )
        )
        return {"Authorization": f"Bearer {created['api_key']}"}

    @contextmanager
    def instance(self, name: str) -> Iterator[httpx.Client]:
        """One ``gmem serve`` on a free port; SIGTERM and wait on exit."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        log = self.tmp_path / f"{name}.log"
        with log.open("ab") as sink:
            process = subprocess.Popen(
                [GMEM, "serve", "--port", str(port), "--data-dir", str(self.tmp_path / name)],
                stdout=sink,
                stderr=sink,
                env=self.env,
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
            except subprocess.TimeoutExpired:  # pragma: no cover - reported by the failure
                process.kill()
                process.wait()
                pytest.fail(f"{name} did not stop on SIGTERM")
        assert "Traceback" not in log.read_text()


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    """A fresh schema on the test server, reached through the URL's search_path."""
    dsn = postgres_dsn()
    assert dsn is not None
    schema = "gmem_test_" + uuid.uuid4().hex[:12]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    separator = "&" if "?" in dsn else "?"
    url = f"{dsn}{separator}options={quote(f'-csearch_path={schema}')}"
    try:
        yield Deployment(tmp_path, url)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def two(deployment: Deployment) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """Two instances started at the same time (they race to migrate the empty schema)."""
    with ExitStack() as stack:
        started: list[httpx.Client] = []
        threads = [
            threading.Thread(
                target=lambda n=name: started.append(stack.enter_context(deployment.instance(n)))
            )
            for name in ("a", "b")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(started) == 2
        yield started[0], started[1]


def events(client: httpx.Client, headers: dict[str, str]) -> list[dict[str, Any]]:
    """The whole audit feed of the tenant."""
    found: list[dict[str, Any]] = []
    after = 0
    while True:
        page = client.get("/v1/events", params={"after": after, "limit": 100}, headers=headers)
        assert page.status_code == 200, page.text
        batch = page.json()["events"]
        if not batch:
            return found
        found += batch
        after = batch[-1]["position"]


def test_sixteen_writers_on_two_instances_one_expected_version_one_winner(
    deployment: Deployment, two: tuple[httpx.Client, httpx.Client]
) -> None:
    """Split across two servers, 16 rewrites of version 1: one 200, fifteen 409s."""
    headers = deployment.key()
    first = two[0].put("/v1/memories/m1", json=write_body(), headers=headers)
    assert first.status_code == 201, first.text
    barrier = threading.Barrier(16)
    responses: list[httpx.Response] = []

    def rewrite(n: int) -> None:
        body = write_body(content=f"Writer {n} says so.", expected_version=1)
        barrier.wait()
        responses.append(two[n % 2].put("/v1/memories/m1", json=body, headers=headers))

    threads = [threading.Thread(target=rewrite, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [409] * 15
    assert {r.json()["current_version"] for r in responses if r.status_code == 409} == {2}
    for client in two:
        assert client.get("/v1/memories/m1", headers=headers).json()["version"] == 2
    assert [e["version"] for e in events(two[1], headers)] == [1, 2]


def test_an_idempotent_retry_on_the_other_instance_returns_the_first_result(
    deployment: Deployment, two: tuple[httpx.Client, httpx.Client]
) -> None:
    """The idempotency record is in the database: instance b replays what a answered."""
    headers = deployment.key() | {"Idempotency-Key": "retry-" + uuid.uuid4().hex}
    body = write_body()
    body.pop("expected_version")
    first = two[0].post("/v1/memories", json=body, headers=headers)
    retry = two[1].post("/v1/memories", json=body, headers=headers)

    assert first.status_code == 201, first.text
    assert (retry.status_code, retry.json()) == (first.status_code, first.json())
    assert len(events(two[0], headers)) == 1


def test_both_expiry_workers_record_one_expiry_per_item(
    deployment: Deployment, two: tuple[httpx.Client, httpx.Client]
) -> None:
    """Both servers sweep every half second; each item still gets exactly one expired event."""
    headers = deployment.key()
    ids = [f"short-{n}" for n in range(12)]
    for n, memory_id in enumerate(ids):
        put = two[n % 2].put(
            f"/v1/memories/{memory_id}", json=write_body(ttl_seconds=1), headers=headers
        )
        assert put.status_code == 201, put.text

    deadline = time.monotonic() + 30
    while True:
        expired = [e for e in events(two[0], headers) if e["type"] == "memory.expired"]
        if len(expired) >= len(ids) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    time.sleep(1.5)  # a few more sweeps by both workers must add nothing

    expired = [e for e in events(two[1], headers) if e["type"] == "memory.expired"]
    assert sorted(e["memory_id"] for e in expired) == sorted(ids)
    for memory_id in ids:
        item = two[1].get(f"/v1/memories/{memory_id}", headers=headers).json()
        assert item["status"] == "expired"
