"""Serving the app with uvicorn: in the foreground (``gmem serve``) or in a thread.

``gmem serve`` runs uvicorn in the main thread, so SIGTERM and SIGINT shut it down
gracefully: it stops accepting connections, lets in-flight requests finish, then the
app's lifespan stops the expiry worker and closes the store. :func:`running` serves an
app on a free port in a background thread, for the demo and the tests: real sockets,
real HTTP, the real app, in one process.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from governed_memory.errors import ConfigError
from governed_memory.http.protocol import Limits, protocol_class

GRACEFUL_SHUTDOWN_SECONDS = 30
KEEP_ALIVE_SECONDS = 5
#: Descriptors kept free of connections: the listener, logs, and the store's own (SQLite
#: opens a database, WAL and shared-memory file for each of up to 40 worker threads).
RESERVED_FILES = 256


def _config(app: FastAPI, host: str, port: int, limits: Limits | None = None) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_class(limits or Limits()),  # bounded heads, read deadlines, a cap
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        log_config=None,  # logging is configured by the caller (JSON lines)
        access_log=False,  # the app writes its own, content-free access log
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )


def serve(app: FastAPI, host: str, port: int, limits: Limits | None = None) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully."""
    limits = limits or Limits()
    raise_file_limit(limits.max_connections)
    uvicorn.Server(_config(app, host, port, limits)).run()


def raise_file_limit(connections: int) -> int:
    """Raise the soft limit of open files to the hard limit; refuse a connection cap the
    process could not honour (each connection is one descriptor, and the store needs
    some). Returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, connections + RESERVED_FILES)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    if connections + RESERVED_FILES > soft:
        raise ConfigError(
            f"GMEM_MAX_CONNECTIONS: {connections} connections need more open files than the "
            f"limit allows ({soft}); lower it or raise the limit (ulimit -n)"
        )
    return soft


@contextmanager
def running(app: FastAPI, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve ``app`` on a free port in a thread; yield its base URL; stop it after."""
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP;
    # without it every response waits ~40 ms for a delayed ACK (Nagle).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(_config(app, host, port))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="gmem-http", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the HTTP server did not start")
            time.sleep(0.01)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=GRACEFUL_SHUTDOWN_SECONDS + 5)
        sock.close()


__all__ = ["running", "serve"]
