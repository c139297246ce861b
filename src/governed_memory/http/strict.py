"""Strict requests: one value per name, in the JSON body, the query and the key headers.

Python's ``json`` keeps the last of two members with the same name and accepts ``NaN`` and
``Infinity``; Starlette keeps every value of a repeated query parameter or header and the
framework picks one. Another component in front of the service (a proxy, a WAF, an audit
log) may pick a different one, so ``{"trust": "untrusted", "trust": "trusted"}``,
``?agent_id=a&agent_id=b`` or two ``Authorization`` headers could be read as two different
requests: a field smuggled past whichever component checks it. So a route of this API
refuses, before validation sees anything:

- a JSON body with a repeated member name, or ``NaN``/``Infinity`` (I-JSON, RFC 7493):
  400, malformed JSON;
- a repeated query parameter: 422 naming it;
- a query parameter the route does not take (``?agentid=`` for ``agent_id``): 422 naming
  it and the closest parameter the route takes, like an unknown member of a JSON body;
- a repeated ``Authorization``, ``Idempotency-Key`` or ``Content-Type`` header: 400;
- a body that is not ``application/json`` (a form, ``text/plain``, no type at all, or a
  ``charset`` other than UTF-8): 415; JSON bytes that are not UTF-8 (UTF-16 and UTF-32
  would be auto-detected by Python's parser, and read differently by a proxy): 400.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from governed_memory.errors import MalformedRequest, UnsupportedMediaType, ValidationError
from governed_memory.http.auth import TENANT_QUERY_PARAMETERS
from governed_memory.http.problems import (
    DUPLICATE_MEMBER,
    NOT_A_NUMBER,
    NOT_UTF8,
)

SINGLE_HEADERS = ("authorization", "idempotency-key", "content-type")
_SINGLE = frozenset(name.encode("latin-1") for name in SINGLE_HEADERS)


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members: dict[str, Any] = {}
    for name, value in pairs:
        if name in members:
            raise json.JSONDecodeError(DUPLICATE_MEMBER, "", 0)
        members[name] = value
    return members


def _no_constant(name: str) -> Any:
    raise json.JSONDecodeError(NOT_A_NUMBER, "", 0)


def loads(body: bytes | str) -> Any:
    """Parse strict JSON: UTF-8 only, unique member names, no ``NaN``/``Infinity``."""
    if isinstance(body, bytes):
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError:
            raise json.JSONDecodeError(NOT_UTF8, "", 0) from None
    return json.loads(body, object_pairs_hook=_unique_members, parse_constant=_no_constant)


JSON_MEDIA_TYPE = "application/json"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def refuse_foreign_media(request: Request) -> None:
    """415 unless a request that carries a body says it is UTF-8 ``application/json``."""
    if request.method not in BODY_METHODS:
        return
    length = request.headers.get("content-length")
    if length in (None, "0") and "transfer-encoding" not in request.headers:
        return  # no body: forget and the like need no type
    media, _, parameters = request.headers.get("content-type", "").partition(";")
    if media.strip().lower() != JSON_MEDIA_TYPE:
        raise UnsupportedMediaType(
            "send the body as application/json (Content-Type: application/json)"
        )
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in (
            "utf-8",
            "utf8",
        ):
            raise UnsupportedMediaType("JSON bodies must be UTF-8 (charset=utf-8)")


def refuse_repetition(request: Request) -> None:
    """Raise if a query parameter or a single-valued header is given more than once."""
    # One pass over the raw headers: a getlist per name decoded every header each time,
    # several microseconds on every request.
    named = [
        name for name in (raw.lower() for raw, _ in request.scope["headers"]) if name in _SINGLE
    ]
    if len(named) != len(set(named)):
        for name in SINGLE_HEADERS:
            if named.count(name.encode("latin-1")) > 1:
                raise MalformedRequest(f"the {name} header is given more than once")
    if not request.scope.get("query_string"):
        return
    repeated = sorted(
        n for n, c in Counter(k for k, _ in request.query_params.multi_items()).items() if c > 1
    )
    if repeated:
        raise ValidationError.field(repeated[0], "is given more than once")


class StrictRequest(Request):
    """A request whose ``json()`` is :func:`loads`."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads(await self.body())
        return self._json


def refuse_unknown_parameters(request: Request, known: frozenset[str]) -> None:
    """Raise if the query names a parameter the route does not take (a typo such as
    ``agentid`` would otherwise widen the request in silence), with the closest known one.
    Names that try to choose a tenant are left to their own, clearer refusal."""
    if not request.scope.get("query_string"):
        return
    for name in request.query_params:
        if name in known or name.lower() in TENANT_QUERY_PARAMETERS:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1)
        if close:
            hint = f"; did you mean {close[0]}?"
        elif known:
            hint = f"; this route takes {', '.join(sorted(known))}"
        else:
            hint = "; this route takes no query parameters"
        raise ValidationError.field(name, f"is not a query parameter of this route{hint}")


def _query_parameters(dependant: Dependant) -> frozenset[str]:
    """The query parameters a route declares, its dependencies' included."""
    names = {str(param.alias) for param in dependant.query_params}
    for dependency in dependant.dependencies:
        names |= _query_parameters(dependency)
    return frozenset(names)


class StrictRoute(APIRoute):
    """An API route with strict requests (FastAPI's custom route class hook)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        known = _query_parameters(self.dependant)

        async def strict_handler(request: Request) -> Response:
            refuse_repetition(request)
            refuse_unknown_parameters(request, known)
            refuse_foreign_media(request)
            return await handler(StrictRequest(request.scope, request.receive))

        return strict_handler


__all__ = [
    "StrictRequest",
    "StrictRoute",
    "loads",
    "refuse_foreign_media",
    "refuse_repetition",
    "refuse_unknown_parameters",
]
