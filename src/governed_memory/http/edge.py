"""The app's edge: one ASGI middleware, one ``send`` wrapper, for what every request needs.

It does, outermost first, what four middlewares did one inside the other (a coroutine
frame and a ``send`` closure each, per request and per message):

1. the access log and the HTTP metrics (:mod:`.access_log`): every final status,
   including the 500 and the 413 below;
2. unexpected errors → a 500 problem without internals (:mod:`.problems`);
3. the ``RateLimit-*`` headers of the authenticated key (:mod:`.limits`);
4. the body limit: a declared ``Content-Length`` over the limit is 413 before anything is
   read, a streamed body is cut off as soon as it passes the limit (:mod:`.limits`).

Inside all that, every request goes to the lane (:mod:`.lane`), which answers an ordinary
search or write itself and passes anything else on to the app.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from governed_memory.errors import PayloadTooLarge
from governed_memory.http.access_log import KEY_ID_STATE, KNOWN_METHODS, access_log, route_template
from governed_memory.http.lane import Lane
from governed_memory.http.limits import STATE_KEY, RateDecision
from governed_memory.http.problems import INTERNAL, error_response, problem
from governed_memory.observability import Metrics

log = logging.getLogger("governed_memory.http")


class _BodyTooLarge(Exception):
    """Raised inside ``receive`` to stop the app reading an oversized body."""


class _Exchange:
    """One request's state at the edge: its status, its body count, its two channels."""

    __slots__ = (
        "max_bytes",
        "receive",
        "received",
        "refused",
        "scope",
        "send",
        "started",
        "status",
    )

    def __init__(self, scope: Scope, receive: Receive, send: Send, max_bytes: int) -> None:
        self.scope, self.receive, self.send = scope, receive, send
        self.max_bytes = max_bytes
        self.status = 500
        self.started = False
        self.refused = False
        self.received = 0

    async def limited_receive(self) -> Message:
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self.receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.max_bytes:
                self.refused = True
                raise _BodyTooLarge
        return message

    async def app_send(self, message: Message) -> None:
        if not self.refused:  # the app's answer to a cut-off body is replaced by the 413
            await self.edge_send(message)

    async def edge_send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            self.status = int(message["status"])
            decision = (self.scope.get("state") or {}).get(STATE_KEY)
            if isinstance(decision, RateDecision):
                headers = [*message.get("headers", []), *decision.headers()]
                message = {**message, "headers": headers}
        await self.send(message)

    async def answer(self, response: Any) -> None:
        await response(self.scope, self.receive, self.edge_send)


class EdgeMiddleware:
    """Access log and metrics, the 500 of last resort, rate-limit headers, body limit."""

    def __init__(self, app: ASGIApp, max_bytes: int, metrics: Metrics | None) -> None:
        self.app = app
        self.lane = Lane(app)
        self.max_bytes = max_bytes
        self.metrics = metrics

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"the request body is over the limit of {self.max_bytes} bytes")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        exchange = _Exchange(scope, receive, send, self.max_bytes)
        try:
            await self._handle(exchange)
        finally:
            self._log(scope, exchange.status, time.perf_counter() - began)

    async def _handle(self, exchange: _Exchange) -> None:
        declared = dict(exchange.scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await exchange.answer(error_response(self._too_large()))
            return
        try:
            await self.lane(exchange.scope, exchange.limited_receive, exchange.app_send)
        except _BodyTooLarge:
            pass
        except Exception:
            if not exchange.refused:
                # Only the class and frames: the message could quote the input.
                log.exception("unexpected error", extra={"route": route_template(exchange.scope)})
                if not exchange.started:
                    await exchange.answer(problem(INTERNAL, "an unexpected error occurred"))
                return
        if exchange.refused and not exchange.started:
            await exchange.answer(error_response(self._too_large()))

    def _log(self, scope: Scope, status: int, seconds: float) -> None:
        method = scope["method"] if scope["method"] in KNOWN_METHODS else "OTHER"
        route = route_template(scope)
        state = scope.get("state") or {}
        access_log.info(
            "request",
            extra={
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": round(seconds * 1000, 3),
                "key_id": state.get(KEY_ID_STATE),
            },
        )
        if self.metrics is not None:
            self.metrics.observe_request(method, route, status, seconds)


__all__ = ["EdgeMiddleware"]
