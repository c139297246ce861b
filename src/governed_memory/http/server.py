"""Serving the app with uvicorn: in the foreground (``gmem serve``) or in a thread.

``gmem serve`` runs uvicorn in the main thread, so SIGTERM and SIGINT shut it down
gracefully: it stops accepting connections, lets in-flight requests finish, then the
app's lifespan stops the expiry worker and closes the store. :func:`running` serves an
app on a free port in a background thread, for the demo and the tests: real sockets,
real HTTP, the real app, in one process.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import logging
import resource
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from governed_memory._version import __version__
from governed_memory.errors import ConfigError
from governed_memory.http.protocol import Limits, protocol_class

log = logging.getLogger("governed_memory.http")

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


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, before anything else starts: a port in use, a host
    that does not resolve or an address this machine does not have is one
    :class:`ConfigError` line (not a uvicorn log record after the store was opened)."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP;
    # without it every response waits ~40 ms for a delayed ACK (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ConfigError(_why(error, where)) from None
    sock.set_inheritable(True)
    return sock


def _why(error: OSError, where: str) -> str:
    if isinstance(error, socket.gaierror):
        return f"cannot listen on {where}: the host name does not resolve (--host, GMEM_HOST)"
    if error.errno == errno.EADDRINUSE:
        return f"{where} is already in use (another server?): choose another --port (GMEM_PORT)"
    reasons = {
        errno.EADDRNOTAVAIL: "this machine has no such address (--host, GMEM_HOST)",
        errno.EACCES: "permission denied (ports below 1024 need privileges)",
    }
    reason = reasons.get(error.errno or 0, error.strerror or type(error).__name__)
    return f"cannot listen on {where}: {reason}"


def announce(
    listener: socket.socket, store: tuple[str, str] = ("unnamed", "-"), workers: int = 1
) -> None:
    """The one start-up line: the version, the store (kind and location), the URL and the
    number of worker processes."""
    host, port = listener.getsockname()[:2]
    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    kind, location = store
    log.info(
        "gmem %s serving the %s store %s at %s",
        *(__version__, kind, location, url),
        extra={
            "version": __version__,
            "store": kind,
            "location": location,
            "url": url,
            "workers": workers,
        },
    )


def serve_socket(app: FastAPI, listener: socket.socket, limits: Limits) -> None:
    """Serve ``app`` on ``listener`` in this process until SIGTERM or SIGINT.

    What start-up made (modules, the app and its routes and schemas, the store) lives as
    long as the process, so it is frozen out of the garbage collector first
    (:func:`settle_startup`): each full collection while serving then walks only what
    serving made since, instead of stalling every request in flight for the whole heap.
    """
    raise_file_limit(limits.max_connections)
    host, port = listener.getsockname()[:2]
    server = uvicorn.Server(_config(app, host, port, limits))
    settle_startup()
    server.run(sockets=[listener])


def settle_startup() -> None:
    """Collect start-up's garbage, then move every object left to the collector's
    permanent generation (:func:`gc.freeze`), which no collection walks again.

    Measured (docs/benchmarks.md, issue 16, eighth pass): a serving process held about
    150k tracked objects after start-up, and each full collection under write load held
    the GIL ~33 ms, every request in flight waiting; frozen, a full collection walks the
    few thousand objects serving keeps. Called only by ``gmem serve``, which owns its
    process: an application that embeds the app keeps its own collector's settings.
    Frozen objects are never freed, even in a cycle: only start-up's, which stay anyway.
    """
    gc.collect()
    gc.freeze()


def serve(
    app: FastAPI,
    listener: socket.socket,
    limits: Limits | None = None,
    *,
    store: tuple[str, str] = ("unnamed", "-"),
) -> None:
    """Serve on ``listener`` until SIGTERM or SIGINT, then shut down gracefully. First one
    log line names the version, the store (kind and location, ``store``) and the URL."""
    limits = limits or Limits()
    raise_file_limit(limits.max_connections)
    announce(listener, store)
    serve_socket(app, listener, limits)


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
    sock = listen(host, 0)
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


__all__ = ["announce", "listen", "running", "serve", "serve_socket", "settle_startup"]
