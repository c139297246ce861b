"""The server span of each HTTP request (``GMEM_OTEL=on``; the ``otel`` extra).

Added by :func:`governed_memory.http.app.create_app` only when tracing is on, outermost,
so the span covers every layer and sees the final status; with tracing off this module is
never imported. The span is named ``METHOD route`` by the route's template (never the
concrete path, which carries ids) and says the method, the route, the status, the outcome
and, once the service knows it, the tenant (:data:`governed_memory.telemetry.REQUEST_SPAN`).
A W3C ``traceparent`` header of the caller is honoured, so the request joins its trace.
"""

from __future__ import annotations

from opentelemetry import propagate
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from governed_memory import telemetry
from governed_memory.http.access_log import KNOWN_METHODS, UNMATCHED_ROUTE, route_template

METHOD = "http.request.method"
ROUTE = "http.route"
STATUS = "http.response.status_code"


def _headers(scope: Scope) -> dict[str, str]:
    """The request's trace-context headers only (``traceparent``, ``tracestate``…)."""
    wanted = propagate.get_global_textmap().fields
    return {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in scope.get("headers", ())
        if name.decode("latin-1") in wanted
    }


def outcome(status: int) -> str:
    """``ok`` below 400, ``refused`` for the caller's errors, ``error`` for the server's."""
    return "ok" if status < 400 else "refused" if status < 500 else "error"


class TracingMiddleware:
    """One server span per HTTP request; never a body, a query string or a concrete path."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"] if scope["method"] in KNOWN_METHODS else "_OTHER"
        parent = propagate.extract(_headers(scope))
        status = 500
        with telemetry.tracer.start_as_current_span(
            method,
            context=parent,
            kind=SpanKind.SERVER,
            attributes={METHOD: method},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            token = telemetry.REQUEST_SPAN.set(span)

            async def send_and_note(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                await send(message)

            try:
                await self.app(scope, receive, send_and_note)
            finally:
                telemetry.REQUEST_SPAN.reset(token)
                route = route_template(scope)
                if route != UNMATCHED_ROUTE:
                    span.update_name(f"{method} {route}")
                    span.set_attribute(ROUTE, route)
                span.set_attribute(STATUS, status)
                span.set_attribute(telemetry.OUTCOME, outcome(status))
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))


__all__ = ["TracingMiddleware"]
