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
- a repeated ``Authorization``, ``Idempotency-Key`` or ``Content-Type`` header: 400.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from governed_memory.errors import MalformedRequest, ValidationError
from governed_memory.http.problems import (
    DUPLICATE_MEMBER,
    NOT_A_NUMBER,
)

SINGLE_HEADERS = ("authorization", "idempotency-key", "content-type")


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
    """Parse strict JSON: unique member names, no ``NaN``/``Infinity``."""
    return json.loads(body, object_pairs_hook=_unique_members, parse_constant=_no_constant)


def refuse_repetition(request: Request) -> None:
    """Raise if a query parameter or a single-valued header is given more than once."""
    for name in SINGLE_HEADERS:
        if len(request.headers.getlist(name)) > 1:
            raise MalformedRequest(f"the {name} header is given more than once")
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


class StrictRoute(APIRoute):
    """An API route with strict requests (FastAPI's custom route class hook)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            refuse_repetition(request)
            return await handler(StrictRequest(request.scope, request.receive))

        return strict_handler


__all__ = [
    "StrictRequest",
    "StrictRoute",
    "loads",
    "refuse_repetition",
]
