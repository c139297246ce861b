"""Every error as an RFC 9457 ``application/problem+json`` response, from one table.

:data:`PROBLEMS` maps classes of the error tree (:mod:`governed_memory.errors`) to their
HTTP status; the type and the title are those the class names itself. The most specific
listed class in an error's MRO wins. HTTP-level
failures that never reach the service (unknown route, wrong method, malformed JSON) are
turned into errors of the same table, two of them edge-only classes. Details carry ids, versions and
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
from starlette.routing import Match

from governed_memory.errors import (
    TYPE_PREFIX,
    AuthenticationError,
    Conflict,
    GovernedMemoryError,
    IdempotencyKeyReused,
    InvalidTransition,
    MalformedRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    SelfPromotion,
    StoreUnavailable,
    UnsupportedMediaType,
    ValidationError,
    VersionConflict,
)
from governed_memory.observability import Metrics

log = logging.getLogger("governed_memory.http")

PROBLEM_JSON = "application/problem+json"


@dataclass(frozen=True, slots=True)
class ProblemType:
    """The status, the type slug and the title of one kind of problem."""

    status: int
    slug: str
    title: str

    @property
    def type(self) -> str:
        return TYPE_PREFIX + self.slug


#: The one table from error classes to HTTP statuses: the error tree and the two failures
#: of the HTTP edge. Lookup walks each error's MRO, so the most specific listed class wins
#: and anything unlisted (CryptoError, a StoreSignal) answers the bare 500.
PROBLEMS: Mapping[type[GovernedMemoryError], int] = {
    MalformedRequest: 400,
    AuthenticationError: 401,
    PermissionDenied: 403,
    SelfPromotion: 403,
    NotFound: 404,
    MethodNotAllowed: 405,
    Conflict: 409,
    VersionConflict: 409,
    InvalidTransition: 409,
    IdempotencyKeyReused: 409,
    PayloadTooLarge: 413,
    UnsupportedMediaType: 415,
    ValidationError: 422,
    RateLimited: 429,
    StoreUnavailable: 503,
    GovernedMemoryError: 500,
}

_TYPES = {cls: ProblemType(status, cls.slug, cls.title) for cls, status in PROBLEMS.items()}
INTERNAL = _TYPES[GovernedMemoryError]

#: Why the strict parser (:mod:`governed_memory.http.strict`) refused a body; the only
#: parse errors whose reason a problem repeats (our words, never the input's).
DUPLICATE_MEMBER = "duplicate member name"
NOT_A_NUMBER = "NaN and Infinity are not JSON numbers"
NOT_UTF8 = "the body is not UTF-8"
STRICT_JSON_REASONS = frozenset({DUPLICATE_MEMBER, NOT_A_NUMBER, NOT_UTF8})

METHODS = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")

#: A 422 stays small whatever the body: thousands of unknown members (a 64 KiB body holds
#: ~6,000) would otherwise come back as a problem several times larger than the request.
MAX_LISTED_ERRORS = 50
MAX_NAMED_FIELDS = 10
MAX_FIELD_CHARS = 128

#: Routing and parsing failures raised by the framework, as errors of the table.
_HTTP_ERRORS: Mapping[int, GovernedMemoryError] = {
    400: MalformedRequest("the request could not be parsed"),
    404: NotFound("no such resource"),
    405: MethodNotAllowed("this method is not allowed on this resource"),
    413: PayloadTooLarge("the request body is over the limit"),
}


def problem_type(error: GovernedMemoryError) -> ProblemType:
    """The table entry of the most specific class of ``error``."""
    for cls in type(error).__mro__:
        if cls in _TYPES:
            return _TYPES[cls]
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
    invalid = [e for e in errors if e.get("type") == "json_invalid"]
    if invalid:
        detail = "the request body is not valid JSON"
        reason = (invalid[0].get("ctx") or {}).get("error")
        if reason in STRICT_JSON_REASONS:
            detail += f": {reason}"
        return error_response(MalformedRequest(detail))
    fields = []
    for e in errors[:MAX_LISTED_ERRORS]:
        field = _field(e.get("loc", ()))
        message = _message(e, field)
        if len(field) > MAX_FIELD_CHARS:  # an unknown member's name is the caller's text
            field = field[:MAX_FIELD_CHARS] + "…"
        fields.append({"field": field, "message": message})
    names = sorted({f["field"] for f in fields})
    detail = "invalid fields: " + ", ".join(names[:MAX_NAMED_FIELDS])
    if len(names) > MAX_NAMED_FIELDS:
        detail += f" and {len(names) - MAX_NAMED_FIELDS} more"
    extensions: dict[str, Any] = {"errors": fields}
    if len(errors) > MAX_LISTED_ERRORS:
        extensions["errors_omitted"] = len(errors) - MAX_LISTED_ERRORS
    return problem(_TYPES[ValidationError], detail, **extensions)


def http_response(error: HTTPException) -> Response:
    """Routing and parsing failures: 404, 405 (with ``Allow``), 400 and the rest."""
    known = _HTTP_ERRORS.get(error.status_code)
    headers = dict(error.headers or {})
    if known is None:  # a status no route raises today; keep it, say nothing more
        kind = ProblemType(error.status_code, f"http-{error.status_code}", "HTTP error")
        return problem(kind, "the request failed", headers=headers)
    response = error_response(known)
    response.headers.update(headers)
    return response


def allowed_methods(request: Request) -> str:
    """Every method some route serves at this path (the router names only the first route's).

    Two routes may share a path (``PUT`` and ``GET /v1/memories/{id}``); Starlette's 405
    lists the methods of the route it tried first, so ``Allow`` would hide the others. Each
    method is asked of the app's routes with a fresh scope of the same path.
    """
    allowed = []
    for method in METHODS:
        probe = {
            "type": "http",
            "method": method,
            "path": request.scope["path"],
            "root_path": request.scope.get("root_path", ""),
            "headers": [],
            "query_string": b"",
        }
        if any(route.matches(probe)[0] is Match.FULL for route in request.app.router.routes):
            allowed.append(method)
    return ", ".join(allowed)


def domain_response(error: GovernedMemoryError, metrics: Metrics | None) -> JSONResponse:
    """The app's answer to a domain error raised by a route: its problem, the conflicts
    counted."""
    if metrics is not None and isinstance(error, Conflict):
        metrics.observe_conflict(error)
    return error_response(error)


def install(app: FastAPI, metrics: Metrics | None) -> None:
    """Register the handlers that turn every error into a problem."""

    async def on_domain(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, GovernedMemoryError)
        return domain_response(exc, metrics)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return validation_response(exc)

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        response = http_response(exc)
        if exc.status_code == 405:
            response.headers["Allow"] = allowed_methods(request)
        return response

    app.add_exception_handler(GovernedMemoryError, on_domain)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)


__all__ = [
    "PROBLEMS",
    "PROBLEM_JSON",
    "ProblemType",
    "allowed_methods",
    "domain_response",
    "error_response",
    "http_response",
    "install",
    "problem",
    "problem_type",
    "validation_response",
]
