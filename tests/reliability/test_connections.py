"""Connections a client holds are bounded: head size, read time, and how many at once.

Each test drives the real ``gmem serve`` with raw sockets, the way a hostile or broken
client would: megabytes of headers, a head or a body that stops arriving, hundreds of
silent sockets. The server answers 431 or 408 (problem+json) or closes, never grows by
what the client sends, and keeps serving new clients.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.reliability.servers import ServerProcess, create_key

READ_TIMEOUT = 1.5
MAX_CONNECTIONS = 24


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server with a short read timeout and a small connection cap."""
    folder = tmp_path_factory.mktemp("connections")
    env = {
        "GMEM_REQUEST_TIMEOUT_SECONDS": str(READ_TIMEOUT),
        "GMEM_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
    }
    with ServerProcess(folder / "data", folder / "server.log", env=env) as process:
        yield process


def connect(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of the one response the server sends before closing."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 "), f"no response: {data[:80]!r}"
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def rss_kib(server: ServerProcess) -> int:
    """The server process's resident memory, from /proc."""
    assert server.process is not None
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_head_just_over_64_kib_is_answered_431_with_a_problem(server: ServerProcess) -> None:
    """A request head over 64 KiB gets 431 Request Header Fields Too Large, as problem+json."""
    with connect(server) as sock:
        head = b"GET /health/live HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (66 * 1024)
        sock.sendall(head)
        status, headers, body = read_response(sock)
    assert status == 431
    assert headers["content-type"] == "application/problem+json"
    problem = json.loads(body)
    assert problem["status"] == 431
    assert problem["type"] == "urn:gmem:problem:request-header-fields-too-large"


def test_a_head_under_the_limit_is_served(server: ServerProcess) -> None:
    """60 KiB of headers is within the limit: the request is served as usual."""
    with httpx.Client(base_url=server.url, timeout=10) as client:
        response = client.get("/health/live", headers={"X-Pad": "a" * (60 * 1024)})
    assert response.status_code == 200


def test_megabytes_of_headers_are_never_buffered(server: ServerProcess) -> None:
    """Streaming 64 MiB of headers: the server stops reading at the limit and does not grow."""
    before = rss_kib(server)
    sent = 0
    with connect(server) as sock:
        sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\nX-Pad: ")
        chunk = b"a" * 65536
        try:
            while sent < 64 * 1024 * 1024:
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass
    grown = rss_kib(server) - before
    assert sent < 32 * 1024 * 1024, "the server kept reading a head far over the limit"
    assert grown < 16 * 1024, f"the server grew by {grown} KiB"


def test_a_head_that_stops_arriving_is_answered_408(server: ServerProcess) -> None:
    """Half a request head, then silence: 408 once the read time has passed, then close."""
    with connect(server) as sock:
        sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        status, _, body = read_response(sock)
        waited = time.monotonic() - started
    assert status == 408
    assert json.loads(body)["type"] == "urn:gmem:problem:request-timeout"
    assert READ_TIMEOUT - 0.2 <= waited < READ_TIMEOUT + 5


def test_a_body_that_stops_arriving_is_answered_408(server: ServerProcess) -> None:
    """A body announced as 200 bytes of which 20 arrive: 408, and nothing is written."""
    key = create_key(server.data_dir)
    with connect(server) as sock:
        sock.sendall(
            b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {key}\r\nContent-Length: 200\r\n\r\n".encode()
            + b'{"agent_id": "bot", '
        )
        status, _, _ = read_response(sock)
    assert status == 408


def test_a_silent_connection_is_closed_after_the_read_time(server: ServerProcess) -> None:
    """A connection that never sends a byte is closed (no answer owed) after the read time."""
    with connect(server) as sock:
        started = time.monotonic()
        assert sock.recv(1024) == b""
        assert time.monotonic() - started < READ_TIMEOUT + 5


def test_idle_connections_never_starve_new_clients(server: ServerProcess) -> None:
    """Twice the cap of idle connections, kept open: a new client is still served at once."""
    with ExitStack() as stack:
        for _ in range(2 * MAX_CONNECTIONS):
            stack.enter_context(connect(server))
        with httpx.Client(base_url=server.url, timeout=5) as client:
            for _ in range(3):
                assert client.get("/health/live").status_code == 200


def test_kept_alive_connections_make_room_for_new_clients(server: ServerProcess) -> None:
    """The cap of clients that made one request and keep the connection: a new one is served."""
    with ExitStack() as stack:
        for _ in range(MAX_CONNECTIONS):
            client = stack.enter_context(httpx.Client(base_url=server.url, timeout=5))
            assert client.get("/health/live").status_code == 200
        with httpx.Client(base_url=server.url, timeout=5) as fresh:
            assert fresh.get("/health/live").status_code == 200


def test_slow_clients_at_the_cap_are_refused_503_then_room_returns(server: ServerProcess) -> None:
    """With every place held by a half-sent request, a new client gets 503; after the read
    time the slow ones are gone and new clients are served."""
    with ExitStack() as stack:
        for _ in range(MAX_CONNECTIONS):
            sock = stack.enter_context(connect(server))
            sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\n")
        time.sleep(0.2)
        with connect(server) as extra:
            extra.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            status, _, _ = read_response(extra)
        assert status == 503
        time.sleep(READ_TIMEOUT + 0.5)
        with httpx.Client(base_url=server.url, timeout=5) as client:
            assert client.get("/health/live").status_code == 200


def test_idle_connections_cannot_exhaust_the_descriptors(tmp_path: Path) -> None:
    """With 512 open files allowed, 600 silent sockets cannot lock new clients out: idle
    connections are closed to make room long before descriptors run short."""
    env = {"GMEM_MAX_CONNECTIONS": "200", "GMEM_REQUEST_TIMEOUT_SECONDS": "60"}
    with (
        ServerProcess(tmp_path / "data", tmp_path / "server.log", env=env, open_files=512) as one,
        ExitStack() as stack,
    ):
        for _ in range(600):
            stack.enter_context(connect(one))
        with httpx.Client(base_url=one.url, timeout=5) as client:
            assert client.get("/health/live").status_code == 200


def test_a_connection_cap_beyond_the_open_files_limit_stops_start_up(tmp_path: Path) -> None:
    """GMEM_MAX_CONNECTIONS that the process's open-files limit cannot honour is refused at
    start with one line naming the setting."""
    env = {"GMEM_MAX_CONNECTIONS": "5000"}
    process = ServerProcess(tmp_path / "data", tmp_path / "server.log", env=env, open_files=512)
    process.start()
    assert process.process is not None
    assert process.process.wait(timeout=60) != 0
    process.process = None
    assert "GMEM_MAX_CONNECTIONS" in (tmp_path / "server.log").read_text()
