"""An ``application/problem+json`` answer back into the library's exception.

The class is chosen by the problem's ``type`` (never by its text): ``BY_TYPE`` is read off
the error tree of :mod:`governed_memory.errors`, where each class names its slug, so a
class added there is understood here without a second table. Code written against
:class:`~governed_memory.MemoryService` thus handles the same errors over HTTP. An answer
that is not one of ours (a proxy's page, an unknown type) maps by its status.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import httpx

from governed_memory.errors import (
    TYPE_PREFIX,
    AuthenticationError,
    Conflict,
    FieldError,
    GovernedMemoryError,
    InvalidTransition,
    MalformedRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    StoreSignal,
    StoreUnavailable,
    ValidationError,
    VersionConflict,
)


class Sent(Protocol):
    """What the mapping needs to know of the request (a ``Call`` is one)."""

    @property
    def method(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def memory_id(self) -> str | None: ...
    @property
    def expected_version(self) -> int | None: ...


Factory = Callable[[str, Mapping[str, Any], httpx.Response, Sent], GovernedMemoryError]


def _simple(cls: type[GovernedMemoryError]) -> Factory:
    return lambda detail, problem, response, sent: cls(detail)


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _validation(
    detail: str, problem: Mapping[str, Any], response: httpx.Response, sent: Sent
) -> GovernedMemoryError:
    errors = [
        FieldError(str(entry.get("field", "")), str(entry.get("message", "is invalid")))
        for entry in problem.get("errors") or ()
        if isinstance(entry, Mapping)
    ]
    return ValidationError(detail, errors)


def _version_conflict(
    detail: str, problem: Mapping[str, Any], response: httpx.Response, sent: Sent
) -> GovernedMemoryError:
    expected = _int(problem.get("expected_version"), sent.expected_version or 0)
    current = _int(problem.get("current_version"), -1)
    error = VersionConflict(sent.memory_id or "", expected, current)
    error.detail = detail
    error.args = (detail,)
    return error


def _invalid_transition(
    detail: str, problem: Mapping[str, Any], response: httpx.Response, sent: Sent
) -> GovernedMemoryError:
    current = problem.get("current_version")
    return InvalidTransition(detail, None if current is None else _int(current, 0))


def _rate_limited(
    detail: str, problem: Mapping[str, Any], response: httpx.Response, sent: Sent
) -> GovernedMemoryError:
    retry_after = problem.get("retry_after", response.headers.get("Retry-After"))
    return RateLimited(detail, max(0, _int(retry_after, 1)))


#: The classes whose problems carry extension members the exception keeps.
_RICH: Mapping[type[GovernedMemoryError], Factory] = {
    ValidationError: _validation,
    VersionConflict: _version_conflict,
    InvalidTransition: _invalid_transition,
    RateLimited: _rate_limited,
}

#: Problems of the HTTP edge alone, raised as what a library caller already handles: a
#: request the service could not parse is invalid input; a method the route does not
#: serve is the client's own bug, left to the base class.
_RAISED_AS: Mapping[type[GovernedMemoryError], type[GovernedMemoryError]] = {
    MalformedRequest: ValidationError,
    MethodNotAllowed: GovernedMemoryError,
}


def _wire_classes() -> Iterator[type[GovernedMemoryError]]:
    """The tree of :mod:`governed_memory.errors`, parents first, without the branch that
    never leaves the process."""
    pending = [GovernedMemoryError]
    while pending:
        cls = pending.pop(0)
        if issubclass(cls, StoreSignal) or cls.__module__ != GovernedMemoryError.__module__:
            continue
        yield cls
        pending.extend(cls.__subclasses__())


def _factory(cls: type[GovernedMemoryError]) -> Factory:
    cls = _RAISED_AS.get(cls, cls)
    return _RICH.get(cls) or _simple(cls)


def _by_type() -> dict[str, Factory]:
    # Parents come first, so a slug several classes share maps to the most general one
    # ("internal": GovernedMemoryError, not CryptoError).
    found: dict[str, Factory] = {}
    for cls in _wire_classes():
        found.setdefault(cls.slug, _factory(cls))
    return found


#: The problem types of the API (``urn:gmem:problem:<slug>``) → the library's exceptions.
BY_TYPE: Mapping[str, Factory] = _by_type()

#: When an answer is not one of ours (a proxy's page, an unknown type): by status.
BY_STATUS: Mapping[int, Factory] = {
    400: _validation,
    401: _simple(AuthenticationError),
    403: _simple(PermissionDenied),
    404: _simple(NotFound),
    409: _simple(Conflict),
    413: _simple(PayloadTooLarge),
    422: _validation,
    429: _rate_limited,
    502: _simple(StoreUnavailable),
    503: _simple(StoreUnavailable),
    504: _simple(StoreUnavailable),
}


def _problem(response: httpx.Response) -> Mapping[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, Mapping) else {}


def error_from(response: httpx.Response, sent: Sent) -> GovernedMemoryError:
    """The library exception an error answer stands for, chosen by its problem ``type``."""
    problem = _problem(response)
    kind = problem.get("type")
    factory = None
    if isinstance(kind, str) and kind.startswith(TYPE_PREFIX):
        factory = BY_TYPE.get(kind.removeprefix(TYPE_PREFIX))
    factory = factory or BY_STATUS.get(response.status_code, _simple(GovernedMemoryError))
    detail = problem.get("detail") or problem.get("title")
    if not isinstance(detail, str) or not detail:
        detail = f"{sent.method} {sent.path} answered HTTP {response.status_code}"
    return factory(detail, problem, response, sent)


__all__ = ["BY_STATUS", "BY_TYPE", "Sent", "error_from"]
