"""The HTTP load generator, run in a process of its own: ``python -m bench.loadgen SPEC``.

SPEC is a JSON file ``{"url": ..., "clients": [{"key": ..., "requests": [{"method",
"path", "json"?}, ...]}, ...]}``. Each client is one coroutine with its own keep-alive
connection, sending its requests one after another; all clients start together. Prints
one JSON object: requests, seconds, requests/s, latency percentiles and status codes.

It speaks HTTP/1.1 over asyncio streams directly: requests are encoded before the clock
starts and responses are parsed only as far as the status line and Content-Length, so
the generator costs a fraction of what a general client (httpx) costs per request and
its ceiling (measured against ``/health/live``) stays well above the server's rates.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from bench.stats import latency_summary


def _encode(host: str, key: str | None, request: dict[str, Any]) -> bytes:
    body = b"" if request.get("json") is None else json.dumps(request["json"]).encode()
    lines = [f"{request['method']} {request['path']} HTTP/1.1", f"Host: {host}"]
    if key:
        lines.append(f"Authorization: Bearer {key}")
    if body:
        lines.append("Content-Type: application/json")
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body


async def _response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    chunked = False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length:
        await reader.readexactly(length)
    return status


async def _client(
    host: str, port: int, payloads: list[bytes], latencies: list[float], statuses: Counter[int]
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    clock = time.perf_counter
    try:
        for payload in payloads:
            start = clock()
            writer.write(payload)
            status = await _response(reader)
            latencies.append(clock() - start)
            statuses[status] += 1
    finally:
        writer.close()


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    url = urlsplit(spec["url"])
    host, port = url.hostname or "127.0.0.1", url.port or 80
    encoded = [
        [_encode(f"{host}:{port}", client.get("key"), r) for r in client["requests"]]
        for client in spec["clients"]
    ]
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    start = time.perf_counter()
    await asyncio.gather(*(_client(host, port, p, latencies, statuses) for p in encoded))
    seconds = time.perf_counter() - start
    summary: dict[str, Any] = latency_summary(latencies)
    summary.update(
        requests=len(latencies),
        seconds=seconds,
        per_s=len(latencies) / seconds,
        clients=len(spec["clients"]),
        statuses={str(code): count for code, count in sorted(statuses.items())},
    )
    return summary


def main(path: str) -> None:
    with open(path, encoding="utf-8") as handle:
        spec = json.load(handle)
    print(json.dumps(asyncio.run(run(spec))))


if __name__ == "__main__":
    main(sys.argv[1])
