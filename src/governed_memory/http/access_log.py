"""The access log: one content-free JSON line and one metrics sample per HTTP request.

It is the outermost middleware of the app (see :mod:`governed_memory.http.app`), so it
sees every final status, including the 500s of the layers inside it.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from governed_memory.observability import ACCESS_LOGGER, Metrics

#: Where the authenticator leaves the id of the request's API key, for this log to name.
KEY_ID_STATE = "key_id"
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED_ROUTE = "unmatched"

access_log = logging.getLogger(ACCESS_LOGGER)


def route_template(scope: Scope) -> str:
    """The template of the route that handled the request (``/v1/memories/{id}``)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


class AccessLogMiddleware:
    """One JSON access-log line and one metrics sample per request; never a body.

    Logs the method, the route template (not the concrete path, which carries ids), the
    status, the duration and the id of the API key that authenticated, if any.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics | None) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            seconds = time.perf_counter() - started
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


__all__ = ["KEY_ID_STATE", "AccessLogMiddleware", "route_template"]
