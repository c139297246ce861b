"""Every error as an RFC 9457 ``application/problem+json`` response, from one table.

:data:`PROBLEMS` maps each class of the error tree (:mod:`governed_memory.errors`) to its
status, type and title; the most specific class in an error's MRO wins. HTTP-level
failures that never reach the service (unknown route, wrong method, malformed JSON, a
request the schema refuses) use :data:`HTTP_PROBLEMS`. Details carry ids, versions and
field names only: the service's messages never quote content, pydantic's messages are
used without the input they refer to, and an unexpected exception becomes a 500 whose
body says nothing about it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from governed_memory.errors import (
    AuthenticationError,
    Conflict,
    GovernedMemoryError,
    IdempotencyKeyReused,
    InvalidTransition,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    SelfPromotion,
    StoreUnavailable,
    ValidationError,
    VersionConflict,
)
from governed_memory.observability import Metrics, route_template

log = logging.getLogger("governed_memory.http")

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:gmem:problem:"


@dataclass(frozen=True, slots=True)
class ProblemType:
    """The status, the type slug and the title of one kind of problem."""

    status: int
    slug: str
    title: str

    @property
    def type(self) -> str:
        return TYPE_PREFIX + self.slug


#: The one table from the error tree to problems (most specific class first is not
#: required: lookup walks each error's MRO).
PROBLEMS: Mapping[type[GovernedMemoryError], ProblemType] = {
    ValidationError: ProblemType(422, "validation", "Validation failed"),
    AuthenticationError: ProblemType(401, "unauthenticated", "Authentication required"),
    PermissionDenied: ProblemType(403, "forbidden", "Permission denied"),
    SelfPromotion: ProblemType(403, "self-review", "Self-review is not allowed"),
    NotFound: ProblemType(404, "not-found", "Not found"),
    Conflict: ProblemType(409, "conflict", "Conflict"),
    VersionConflict: ProblemType(409, "version-conflict", "Version conflict"),
    InvalidTransition: ProblemType(409, "invalid-transition", "Invalid status transition"),
    IdempotencyKeyReused: ProblemType(409, "idempotency-key-reused", "Idempotency key reused"),
    PayloadTooLarge: ProblemType(413, "payload-too-large", "Payload too large"),
    RateLimited: ProblemType(429, "rate-limited", "Too many requests"),
    StoreUnavailable: ProblemType(503, "unavailable", "Service unavailable"),
    GovernedMemoryError: ProblemType(500, "internal", "Internal server error"),
}

INTERNAL = PROBLEMS[GovernedMemoryError]
MALFORMED = ProblemType(400, "malformed-request", "Malformed request")

#: Problems raised by routing and parsing, by HTTP status.
HTTP_PROBLEMS: Mapping[int, ProblemType] = {
    400: MALFORMED,
    404: ProblemType(404, "not-found", "Not found"),
    405: ProblemType(405, "method-not-allowed", "Method not allowed"),
    413: PROBLEMS[PayloadTooLarge],
}


def problem_type(error: GovernedMemoryError) -> ProblemType:
    """The table entry of the most specific class of ``error``."""
    for cls in type(error).__mro__:
        if cls in PROBLEMS:
            return PROBLEMS[cls]
    return INTERNAL  # pragma: no cover - GovernedMemoryError is in the table


def problem(
    kind: ProblemType,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    """A problem+json response."""
    body = {"type": kind.type, "title": kind.title, "status": kind.status, "detail": detail}
    return JSONResponse(
        body | extensions, status_code=kind.status, headers=headers, media_type=PROBLEM_JSON
    )


def error_response(error: GovernedMemoryError) -> JSONResponse:
    """The problem response of a domain error, with its useful extension members."""
    kind = problem_type(error)
    if kind is INTERNAL:
        log.error("internal error", extra={"error_type": type(error).__name__})
        return problem(INTERNAL, "an unexpected error occurred")
    extensions: dict[str, Any] = {}
    headers: dict[str, str] = {}
    if isinstance(error, ValidationError):
        extensions["errors"] = [{"field": e.field, "message": e.message} for e in error.errors]
    if isinstance(error, VersionConflict):
        extensions["current_version"] = error.current_version
        extensions["expected_version"] = error.expected_version
    if isinstance(error, InvalidTransition) and error.current_version is not None:
        extensions["current_version"] = error.current_version
    if isinstance(error, RateLimited):
        headers["Retry-After"] = str(error.retry_after)
        extensions["retry_after"] = error.retry_after
    if isinstance(error, AuthenticationError):
        headers["WWW-Authenticate"] = 'Bearer realm="gmem"'
    return problem(kind, error.detail, headers=headers, **extensions)


def _field(loc: Sequence[int | str]) -> str:
    """``("body", "provenance", "ref")`` → ``provenance.ref``; the body itself is ``body``."""
    parts = [str(part) for part in loc[1:]] if len(loc) > 1 else [str(p) for p in loc]
    return ".".join(parts)


def _message(error: Mapping[str, Any], field: str) -> str:
    if error.get("type") == "extra_forbidden":
        if field.split(".")[-1] in {"tenant_id", "tenant"}:
            return "the tenant comes from the API key; a request cannot name it"
        return "is not a known field"
    return str(error.get("msg", "is invalid"))


def validation_response(error: RequestValidationError) -> JSONResponse:
    """400 for a body that is not JSON; 422 listing every offending field otherwise."""
    errors = error.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return problem(MALFORMED, "the request body is not valid JSON")
    fields = []
    for e in errors:
        field = _field(e.get("loc", ()))
        fields.append({"field": field, "message": _message(e, field)})
    names = ", ".join(sorted({f["field"] for f in fields}))
    return problem(PROBLEMS[ValidationError], f"invalid fields: {names}", errors=fields)


def http_response(error: HTTPException) -> Response:
    """Routing and parsing failures: 404, 405 (with ``Allow``), 400 and the rest."""
    kind = HTTP_PROBLEMS.get(error.status_code) or ProblemType(
        error.status_code, f"http-{error.status_code}", "HTTP error"
    )
    detail = {
        404: "no such resource",
        405: "this method is not allowed on this resource",
        400: "the request could not be parsed",
    }.get(error.status_code, kind.title.lower())
    return problem(kind, detail, headers=dict(error.headers or {}))


def install(app: FastAPI, metrics: Metrics | None) -> None:
    """Register the handlers that turn every error into a problem."""

    async def on_domain(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, GovernedMemoryError)
        if metrics is not None and isinstance(exc, Conflict):
            metrics.observe_conflict(exc)
        return error_response(exc)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return validation_response(exc)

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return http_response(exc)

    app.add_exception_handler(GovernedMemoryError, on_domain)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)


class UnexpectedErrorMiddleware:
    """The last line: any exception no handler took becomes a 500 without internals.

    Starlette's own last line re-raises after answering, which makes the server log the
    exception's message; this one logs only its class and frames, and swallows it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_and_note(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        except Exception:
            log.exception("unexpected error", extra={"route": route_template(scope)})
            if not started:
                response = problem(INTERNAL, "an unexpected error occurred")
                await response(scope, receive, send)


__all__ = [
    "HTTP_PROBLEMS",
    "PROBLEMS",
    "PROBLEM_JSON",
    "ProblemType",
    "UnexpectedErrorMiddleware",
    "error_response",
    "http_response",
    "install",
    "problem",
    "problem_type",
    "validation_response",
]
