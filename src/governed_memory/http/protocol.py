"""The HTTP/1.1 connection protocol: uvicorn's httptools protocol with bounded reading.

uvicorn reads a request head of any size and waits for a half-sent request, or a
connection that never sends one, forever: one unauthenticated client could grow the
process by the size of its headers, and a few hundred silent sockets could take every
file descriptor. This protocol bounds what a client may hold:

- **Head size.** At most ``max_head_bytes`` (64 KiB) of request line and headers; the
  bytes past the limit are never handed to the parser, and the client gets ``431``
  and a closed connection.
- **Read time.** A request must arrive whole (head and body) within ``read_timeout``
  seconds of its first byte, and a new connection must start its first request within
  the same time; otherwise the client gets ``408`` (or, if it never sent a byte, just a
  closed connection). Between requests the usual keep-alive timeout applies.
- **Connections.** At most ``max_connections`` at a time. A new connection beyond the
  cap first closes the longest-idle keep-alive connection (one with no request in
  flight); if every connection is busy, the new one is refused with ``503``. Idle
  connections therefore never starve new clients, and slow ones are bounded by the
  read time.

The answers are small ``application/problem+json`` bodies written by the protocol itself:
the app never sees such a request.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

MAX_HEAD_BYTES = 64 * 1024
READ_TIMEOUT_SECONDS = 20.0
MAX_CONNECTIONS = 1_000
#: After a refusal the connection reads and drops what the client still sends for this
#: long before it closes, so the client can read the answer (closing with unread data
#: would reset the connection and lose it; nginx's "lingering close"), or until it has
#: dropped this many bytes.
LINGER_SECONDS = 2.0
LINGER_BYTES = 1024 * 1024

_REASONS = {
    408: ("request-timeout", "Request timeout", "the request did not arrive in time"),
    431: (
        "request-header-fields-too-large",
        "Request header fields too large",
        "the request head is over the limit",
    ),
    503: ("unavailable", "Service unavailable", "too many connections; retry shortly"),
}
_STATUS_TEXT = {
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


def problem_bytes(status: int) -> bytes:
    """A complete ``Connection: close`` response carrying a problem+json body."""
    slug, title, detail = _REASONS[status]
    body = json.dumps(
        {
            "type": f"urn:gmem:problem:{slug}",
            "title": title,
            "status": status,
            "detail": detail,
        }
    ).encode("ascii")
    head = (
        f"HTTP/1.1 {status} {_STATUS_TEXT[status]}\r\n"
        "content-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode("ascii")
    return head + body


class Limits:
    """The bounds of one server (shared by every connection of it)."""

    def __init__(
        self,
        *,
        max_head_bytes: int = MAX_HEAD_BYTES,
        read_timeout: float = READ_TIMEOUT_SECONDS,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        if max_head_bytes < 1024 or read_timeout <= 0 or max_connections < 1:
            raise ValueError("connection limits must be positive (head at least 1 KiB)")
        self.max_head_bytes = max_head_bytes
        self.read_timeout = read_timeout
        self.max_connections = max_connections


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a head-size cap, read deadlines and a connection cap.

    Bind :class:`Limits` with :func:`protocol_class`; uvicorn builds one instance per
    connection.
    """

    limits: Limits = Limits()

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._head_bytes = 0
        self._in_head = True  # reading a request head (or waiting for the first request)
        self._reading = False  # a request is being read (head or body)
        self._received_any = False
        self._deadline: asyncio.TimerHandle | None = None
        self._idle_since = time.monotonic()
        self._discarding = False  # refused: what arrives now is dropped unread
        self._discarded = 0

    # -- connection life ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections and not self._evict_idle():
            self._refuse(503)
            return
        self._arm_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_deadline()
        super().connection_lost(exc)

    def _evict_idle(self) -> bool:
        """Close the longest-idle connection without a request in flight; False if none."""
        idle = [
            c
            for c in self.connections
            if isinstance(c, GuardedProtocol) and c is not self and c._is_idle()
        ]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c._idle_since)
        oldest.transport.close()
        self.connections.discard(oldest)
        return True

    def _is_idle(self) -> bool:
        if self._reading or self.transport is None or self.transport.is_closing():
            return False
        return self.cycle is None or self.cycle.response_complete

    # -- reading --------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._discarding:
            self._discarded += len(data)
            if self._discarded > LINGER_BYTES:
                self.transport.close()
            return
        self._received_any = True
        if not self._in_head:
            super().data_received(data)
            return
        room = self.limits.max_head_bytes - self._head_bytes
        if len(data) <= room:
            self._head_bytes += len(data)
            super().data_received(data)
            return
        # Feed only what the limit allows: if the head completes inside it, the rest is
        # body (or the next request) and goes through; otherwise the head is too large.
        self._head_bytes += room
        super().data_received(data[:room])
        if self._in_head and not self.transport.is_closing():
            self._refuse(431)
            return
        if not self.transport.is_closing():
            self.data_received(data[room:])

    def on_message_begin(self) -> None:
        # Head bytes are counted from the chunk that ends the previous request on: when
        # one chunk holds the end of one request and the start of the next, that chunk's
        # share of the new head goes uncounted, so the bound is the limit plus one read.
        super().on_message_begin()
        self._in_head = True
        self._reading = True
        self._arm_deadline()

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._reading = False
        self._in_head = True
        self._head_bytes = 0
        self._disarm_deadline()
        self._idle_since = time.monotonic()
        super().on_message_complete()

    # -- deadlines ------------------------------------------------------------------------

    def _arm_deadline(self) -> None:
        self._disarm_deadline()
        self._deadline = self.loop.call_later(self.limits.read_timeout, self._on_deadline)

    def _disarm_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _on_deadline(self) -> None:
        self._deadline = None
        if self.transport is None or self.transport.is_closing():
            return
        if not self._received_any:
            self.transport.close()  # never said a word: nothing to answer
            return
        if self._reading:
            self._refuse(408)

    def _refuse(self, status: int) -> None:
        """Answer ``status`` and close; only close if a response is already on the wire."""
        self._disarm_deadline()
        cycle = self.cycle
        if self._in_head:  # the request being read has no cycle yet; this one is older
            quiet = cycle is None or cycle.response_complete
        else:
            quiet = not cycle.response_started
        # A pipelined request queued behind means an earlier response may be on the wire:
        # a problem written now would interleave with it.
        if quiet and not self.pipeline:
            self.transport.write(problem_bytes(status))
        if cycle is not None and not self._in_head and not cycle.response_complete:
            cycle.disconnected = True  # the app's receive() now says the client left
            cycle.message_event.set()
        self._discarding = True
        self.connections.discard(self)  # on its way out: its place is free for another
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


def protocol_class(limits: Limits) -> type[GuardedProtocol]:
    """A protocol class bound to ``limits`` (uvicorn takes a class, not an instance)."""
    return type("BoundGuardedProtocol", (GuardedProtocol,), {"limits": limits})


__all__ = ["MAX_HEAD_BYTES", "GuardedProtocol", "Limits", "problem_bytes", "protocol_class"]
