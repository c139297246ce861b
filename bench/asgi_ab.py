"""Same-run A/B of the HTTP request path without sockets: two source trees, in turn.

``python -m bench.asgi_ab OLD_SRC NEW_SRC [--items N] [--requests R] [--rounds K]
[--data DIR] [--callgrind]``

:mod:`bench.http_ab` measures what a client sees, but on a shared machine its rates move
with whatever else runs. This drives the app itself: each run is a process with one
source tree first on ``sys.path`` that builds the app with ``create_app`` over a fresh
copy of one loaded store, starts its lifespan, and sends ``R`` requests of each kind
(``/health/live``, searches, writes: the requests of :mod:`bench.httpserver`) straight
into the ASGI app from 16 concurrent clients on uvloop, as uvicorn would, logging JSON
lines to ``/dev/null``. Everything but the sockets and the HTTP parser runs: the edge
middleware, routing, validation, authentication and the rate limit, the thread-pool hop,
the service, the access log and the metrics. Printed per run and as medians and minimums
over rounds: the process's CPU per request (all threads) and the wall time per request.

With ``--callgrind`` each kind of request runs once per tree under valgrind's callgrind,
``R / 3`` and ``R`` requests, and the difference of the two counts over the difference in
requests is the instructions per request: a count that other work on the machine does
not move (slow: about a minute a run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = 16
WARM_UP = 5  # requests per client before the clock starts
KINDS = ("ceiling", "search", "write")
Encoded = tuple[str, str, list[tuple[bytes, bytes]], bytes]


def _encode(key: str | None, request: dict[str, Any]) -> Encoded:
    body = b"" if request.get("json") is None else json.dumps(request["json"]).encode()
    headers = [(b"host", b"127.0.0.1")]
    if key:
        headers.append((b"authorization", f"Bearer {key}".encode()))
    if body:
        headers.append((b"content-type", b"application/json"))
    headers.append((b"content-length", str(len(body)).encode()))
    return request["method"], request["path"], headers, body


async def _call(app: Any, request: Encoded, statuses: dict[int, int]) -> None:
    method, path, headers, body = request
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses[message["status"]] = statuses.get(message["status"], 0) + 1

    await app(scope, receive, send)


async def _drive(app: Any, kinds: dict[str, list[list[Encoded]]]) -> dict[str, Any]:
    startup: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await startup.put({"type": "lifespan.startup"})
    lifespan = asyncio.create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, startup.get, replies.put)
    )
    await replies.get()

    async def client(requests: list[Encoded], statuses: dict[int, int]) -> None:
        for request in requests:
            await _call(app, request, statuses)

    results: dict[str, Any] = {}
    for kind, clients in kinds.items():
        await asyncio.gather(*(client(c[:WARM_UP], {}) for c in clients))
        statuses: dict[int, int] = {}
        count = sum(len(c) - WARM_UP for c in clients)
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(client(c[WARM_UP:], statuses) for c in clients))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        results[kind] = {
            "cpu_ms": cpu * 1000 / count,
            "wall_ms": wall * 1000 / count,
            "statuses": {str(k): v for k, v in sorted(statuses.items())},
        }
    await startup.put({"type": "lifespan.shutdown"})
    await replies.get()
    await lifespan
    return results


def _child(spec_path: str) -> None:
    """One run (a child process, its source tree first on sys.path)."""
    spec = json.loads(Path(spec_path).read_text())
    os.environ.update(GMEM_DATA_DIR=spec["data_dir"], GMEM_RATE_LIMIT_REQUESTS="1000000000")
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the JSON log lines, written and dropped
    import uvloop

    from governed_memory.config import load_settings
    from governed_memory.http.app import create_app
    from governed_memory.observability import configure_logging

    configure_logging("INFO")
    app = create_app(load_settings())
    kinds = {
        kind: [[_encode(c.get("key"), r) for r in c["requests"]] for c in clients]
        for kind, clients in spec["kinds"].items()
    }
    print(json.dumps(uvloop.run(_drive(app, kinds))))


def main() -> None:
    from bench import httpserver, loading
    from bench.workload import Item, Workload

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--data", type=Path, default=None, help="reuse (or fill) this store")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="count instructions per request under valgrind instead (one run each)",
    )
    args = parser.parse_args()
    workload = Workload()
    data_dir = args.data or Path(tempfile.mkdtemp(prefix="gmem-asgi-ab-"))
    loading.ensure(data_dir, workload, args.items, 2, None)
    by_tenant: dict[str, list[Item]] = {}
    for item in workload.items(0, args.items):
        by_tenant.setdefault(item.tenant_id, []).append(item)
    tenants = sorted(by_tenant, key=lambda t: (-len(by_tenant[t]), t))
    keys = {t: httpserver.create_key(data_dir, t) for t in tenants[: httpserver.KEY_TENANTS]}
    sources = {"old": str(Path(args.old).resolve()), "new": str(Path(args.new).resolve())}

    def kinds(count: int) -> dict[str, list[dict[str, Any]]]:
        share = max(1, count // CLIENTS) + WARM_UP
        searches, writes, pings = httpserver.client_requests(
            workload, by_tenant, keys, CLIENTS, share, 80_000_000
        )
        return {"ceiling": pings, "search": searches, "write": writes}

    with tempfile.TemporaryDirectory(prefix="gmem-asgi-ab-") as scratch:
        run = _Runner(data_dir, Path(scratch))
        if args.callgrind:
            _instructions(run, sources, kinds(args.requests // 3), kinds(args.requests))
        else:
            _alternate(run, sources, kinds(args.requests), args.rounds)


class _Runner:
    """Runs one child over a fresh copy of the loaded store."""

    def __init__(self, data_dir: Path, scratch: Path) -> None:
        self.data_dir, self.scratch = data_dir, scratch

    def __call__(
        self,
        src: str,
        kinds: dict[str, Any],
        prefix: list[str] = [],  # noqa: B006 - read only
    ) -> dict[str, Any]:
        store, spec_path = self.scratch / "store", self.scratch / "spec.json"
        shutil.rmtree(store, ignore_errors=True)
        shutil.copytree(self.data_dir, store)  # every run starts from the same store
        spec_path.write_text(json.dumps({"data_dir": str(store), "kinds": kinds}))
        done = subprocess.run(
            [
                *prefix,
                sys.executable,
                "-c",
                f"from bench.asgi_ab import _child; _child({str(spec_path)!r})",
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT}"},
        )
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result


def _alternate(run: _Runner, sources: dict[str, str], kinds: dict[str, Any], rounds: int) -> None:
    rows: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for number in range(rounds):
        for name in ("old", "new") if number % 2 == 0 else ("new", "old"):
            result = run(sources[name], kinds)
            rows[name].append(result)
            line = {
                k: {m: v[m] if m == "statuses" else round(v[m], 3) for m in v}
                for k, v in result.items()
            }
            print(json.dumps({"round": number, "src": name, **line}), flush=True)
    print("medians and minimums over rounds (old -> new, ratio new/old):")
    for kind in KINDS:
        for measure in ("cpu_ms", "wall_ms"):
            for how, pick in (("median", statistics.median), ("min", min)):
                old = pick(r[kind][measure] for r in rows["old"])
                new = pick(r[kind][measure] for r in rows["new"])
                print(
                    f"  {kind:8} {measure:7} {how:6} {old:8.3f} -> {new:8.3f}  ({new / old:.2f}x)"
                )


def _instructions(
    run: _Runner, sources: dict[str, str], few: dict[str, Any], many: dict[str, Any]
) -> None:
    """Instructions per request under callgrind, which counts them whatever else the
    machine runs: the difference between a run of many requests of one kind and a run
    of few, over the difference in requests (start-up and warm-up cancel out)."""
    for kind in KINDS:
        extra = sum(len(c["requests"]) for c in many[kind]) - sum(
            len(c["requests"]) for c in few[kind]
        )
        counted = {}
        for name, src in sources.items():
            total = {}
            for size, spec in (("few", few), ("many", many)):
                log = run.scratch / "callgrind.log"
                prefix = [
                    "valgrind",
                    "--tool=callgrind",
                    "--callgrind-out-file=/dev/null",
                    f"--log-file={log}",
                ]
                run(src, {kind: spec[kind]}, prefix)
                found = re.search(r"Collected : (\d+)", log.read_text())
                assert found is not None, "callgrind printed no count"
                total[size] = int(found.group(1))
            counted[name] = (total["many"] - total["few"]) / extra
        old, new = counted["old"], counted["new"]
        print(
            f"  {kind:8} instructions/request {old / 1e6:.3f} M -> {new / 1e6:.3f} M"
            f"  ({new / old:.2f}x)",
            flush=True,
        )


if __name__ == "__main__":
    main()
