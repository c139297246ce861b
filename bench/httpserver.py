"""HTTP figures: ``gmem serve`` in a subprocess, the load generator in another.

Plugs in as soon as the HTTP service exists (``governed_memory.http`` importable and
``gmem serve`` answering ``--help``); until then the figures are reported as not
available. The server gets a temporary data directory preloaded with workload items
through the service, one API key per client (``gmem keys create ... --json``), and a free
port on 127.0.0.1. Options are passed both as flags (when ``--help`` lists them) and as
``GMEM_*`` variables, so the harness does not depend on which of the two the CLI reads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.workload import Item, Workload

READY_TIMEOUT = 60.0
RATE_LIMIT = 1_000_000_000
KEY_TENANTS = 4


def _gmem() -> list[str]:
    script = Path(sys.executable).parent / "gmem"
    return [str(script)] if script.exists() else [sys.executable, "-m", "governed_memory.cli"]


def _help(*command: str) -> str | None:
    try:
        done = subprocess.run(
            [*_gmem(), *command, "--help"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout + done.stderr if done.returncode == 0 else None


def server_missing() -> str | None:
    """None when ``gmem serve`` exists, else why the HTTP figures cannot be measured."""
    if importlib.util.find_spec("governed_memory.http") is None:
        return "the HTTP service (governed_memory.http) is not built yet"
    if _help("serve") is None:
        return "`gmem serve --help` does not answer"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment(data_dir: Path, port: int | None = None) -> dict[str, str]:
    """The defaults of a real deployment, except the per-key rate limit.

    The limiter (600 requests per minute per key by default) would measure itself, not
    the service; it still runs, with a ceiling the benchmark never reaches.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    env.update(GMEM_DATA_DIR=str(data_dir), GMEM_RATE_LIMIT_REQUESTS=str(RATE_LIMIT))
    if port is not None:
        env.update(GMEM_HOST="127.0.0.1", GMEM_PORT=str(port))
    return env


def _flags(help_text: str, data_dir: Path, port: int | None = None, workers: int = 1) -> list[str]:
    flags = []
    if workers > 1:
        flags += ["--workers", str(workers)]
    if "--data-dir" in help_text:
        flags += ["--data-dir", str(data_dir)]
    if port is not None and "--port" in help_text:
        flags += ["--port", str(port)]
    if port is not None and "--host" in help_text:
        flags += ["--host", "127.0.0.1"]
    if port is not None and "--rate-limit-requests" in help_text:
        flags += ["--rate-limit-requests", str(RATE_LIMIT)]
    return flags


def create_key(data_dir: Path, tenant: str) -> str:
    """A key of ``tenant`` for every agent, read and write, up to trusted."""
    help_text = _help("keys", "create") or ""
    done = subprocess.run(
        [
            *_gmem(),
            "keys",
            "create",
            *_flags(help_text, data_dir),
            "--tenant",
            tenant,
            *(["--principal", "bench"] if "--principal" in help_text else []),
            "--agents",
            "*",
            "--scopes",
            "memory:write,memory:read",
            "--max-trust",
            "trusted",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=_environment(data_dir),
    )
    return str(json.loads(done.stdout)["api_key"])


@contextlib.contextmanager
def serving(data_dir: Path, workers: int = 1, pids: list[int] | None = None) -> Iterator[str]:
    """``gmem serve --workers N`` on a free port over ``data_dir``; yields its base URL
    (and appends the server's process id to ``pids``)."""
    port = _free_port()
    help_text = _help("serve") or ""
    if workers > 1 and "--workers" not in help_text:
        raise RuntimeError("gmem serve has no --workers option")
    log = tempfile.TemporaryFile()  # noqa: SIM115 - outlives this statement, closed below
    server = subprocess.Popen(
        [*_gmem(), "serve", *_flags(help_text, data_dir, port, workers)],
        stdout=log,
        stderr=log,
        env=_environment(data_dir, port),
    )
    url = f"http://127.0.0.1:{port}"
    if pids is not None:
        pids.append(server.pid)
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if server.poll() is not None:
                log.seek(0)
                tail = log.read()[-2000:].decode(errors="replace")
                raise RuntimeError(f"gmem serve exited with {server.returncode}: {tail}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health/ready", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("gmem serve did not become ready in time")
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def load(url: str, clients: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Run the load generator in its own process over ``clients``; its JSON summary."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as spec:
        json.dump({"url": url, "clients": list(clients)}, spec)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench.loadgen", spec.name],
            capture_output=True,
            text=True,
            timeout=1800,
            check=True,
        )
    finally:
        os.unlink(spec.name)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _search_requests(
    workload: Workload, items: Sequence[Item], count: int, seed: int
) -> list[dict[str, Any]]:
    rnd = random.Random(f"{workload.seed}:http:{seed}")
    requests = []
    for _ in range(count):
        item = rnd.choice(items)
        terms = workload.terms(rnd)
        body = {"agent_id": item.agent_id, "purpose": item.purpose, "query": terms, "limit": 10}
        requests.append({"method": "POST", "path": "/v1/search", "json": body})
    return requests


def _write_requests(items: Sequence[Item]) -> list[dict[str, Any]]:
    requests = []
    for item in items:
        body = item.body()
        memory_id = body.pop("id")
        requests.append({"method": "PUT", "path": f"/v1/memories/{memory_id}", "json": body})
    return requests


def client_requests(
    workload: Workload,
    by_tenant: dict[str, list[Item]],
    keys: dict[str, str],
    clients: int,
    share: int,
    first_id: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Each client's searches, writes (new items from ``first_id`` on) and pings."""
    tenants = list(keys)
    searches, writes, pings = [], [], []
    for number in range(clients):
        tenant = tenants[number % len(tenants)]
        searches.append(
            {
                "key": keys[tenant],
                "requests": _search_requests(workload, by_tenant[tenant], share, number),
            }
        )
        fresh = [
            dataclasses.replace(workload.item(first_id + number * share + j), tenant_id=tenant)
            for j in range(share)
        ]
        writes.append({"key": keys[tenant], "requests": _write_requests(fresh)})
        pings.append({"requests": [{"method": "GET", "path": "/health/live"}] * share})
    return searches, writes, pings


def measure(
    data_dir: Path,
    workload: Workload,
    stored: int,
    clients: int,
    requests: int,
    rounds: Sequence[int] = (1,),
) -> list[dict[str, Any]]:
    """Searches/s and writes/s with ``clients`` concurrent clients, and the ceiling, for
    each number of worker processes in ``rounds``.

    ``data_dir`` already holds workload items ``0 .. stored-1``. The clients act for the
    ``KEY_TENANTS`` tenants holding the most items (one key each, clients spread over
    them: several agents of one tenant); each searches the scopes of its tenant's stored
    items and writes new items of that tenant (new ids in every round). The ceiling is
    the same generator against ``/health/live``, which does no work: what the HTTP stack
    alone costs, with the same number of workers. Each round serves its own copy of
    ``data_dir`` as loaded (and keyed), so every round measures the same work.
    """
    by_tenant: dict[str, list[Item]] = {}
    for item in workload.items(0, stored):
        by_tenant.setdefault(item.tenant_id, []).append(item)
    tenants = sorted(by_tenant, key=lambda t: (-len(by_tenant[t]), t))[:KEY_TENANTS]
    keys = {tenant: create_key(data_dir, tenant) for tenant in tenants}
    share = max(1, requests // clients)
    results = []
    for number, workers in enumerate(rounds):
        searches, writes, pings = client_requests(
            workload, by_tenant, keys, clients, share, 70_000_000 + number * 10_000_000
        )
        # Every round serves a fresh copy of the loaded store: the writes of a round
        # must not grow the scopes the next round searches (its searches would return
        # more items each, and the rounds would not measure the same work).
        served = data_dir.with_name(f"{data_dir.name}-round{number}")
        shutil.rmtree(served, ignore_errors=True)
        shutil.copytree(data_dir, served)
        try:
            with serving(served, workers) as url:
                # Warm-up: every client connects (so every worker gets connections) and
                # every worker has done its lazy imports before the clock starts.
                load(url, [{"requests": ping["requests"][:20]} for ping in pings])
                ceiling = load(url, pings)
                search = load(url, searches)
                write = load(url, writes)
        finally:
            shutil.rmtree(served, ignore_errors=True)
        results.append(
            {
                "search": search,
                "write": write,
                "ceiling": ceiling,
                "tenants": len(tenants),
                "workers": workers,
            }
        )
    return results
