"""``POST /v1/search`` answered without the framework's dispatch, when nothing is unusual.

A search through FastAPI passes, besides the service, the exception and exit-stack
middlewares, the router (matching routes through the app's include), the strict route's
checks, the body's reading and parsing, and the solving of its dependencies, each a few
coroutine frames and a few dozen microseconds: about a third of a short search's CPU in
the process. Searches are the calls agents make most, so the edge (:mod:`.edge`: access
log, metrics, 500s, rate-limit headers and the body limit stay its) hands a request to
``/v1/search`` to this ASGI app over the app, which answers a search itself when it is an
ordinary one:

- ``POST`` to exactly ``/v1/search``, no query string, no root path, no dependency
  overrides on the app;
- the ``Content-Type``, ``Authorization`` and ``Idempotency-Key`` headers each at most once,
  the content type ``application/json`` (with ``charset=utf-8`` at most);
- a non-empty body that is strict JSON (:func:`.strict.loads`) and valid for the route's
  own body field (the same validator FastAPI would call).

Anything else goes to the app as before, with the body read so far handed back to it
unchanged (nothing has been counted or recorded yet): every refusal of a malformed or
unusual request is the framework's and the strict route's, as it always was. An ordinary
search is then authenticated by the app's own authenticator (which counts the rate limit,
refuses a named tenant and records the key's use) and answered by the route's own code
(:func:`.routes.answer_search`); a domain error of either becomes the problem the app's
handler makes of it (:func:`.problems.domain_response`). The order of refusals is the
route's: its request checks and the JSON first, then authentication, then the body's
validation (which the lane does before authenticating only to choose its path: an
invalid body goes the app's way and is refused there after authentication, as before).
Answers are the same bytes either way (``tests/http/test_search_lane.py``).
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from governed_memory.errors import GovernedMemoryError
from governed_memory.http import routes, schemas
from governed_memory.http.problems import domain_response
from governed_memory.http.strict import loads

SEARCH_PATH = "/v1/search"
_JSON_TYPES = frozenset({b"application/json", b"application/json; charset=utf-8"})
_COUNTED = frozenset({b"content-type", b"authorization", b"idempotency-key"})


def _search_route() -> Any:
    """The router's ``POST /v1/search`` (what the access log names as the request's
    route)."""
    for route in routes.router.routes:
        if getattr(route, "path", None) == SEARCH_PATH and "POST" in route.methods:  # type: ignore[attr-defined]
            return route
    raise LookupError(SEARCH_PATH)  # pragma: no cover - the route is defined in routes.py


class SearchLane:
    """The ASGI app over the app that answers ordinary searches; anything else it passes
    on.

    The app's ``state.search_lane`` false sends every request through the app (the tests
    compare the two)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.route = _search_route()
        self.field = self.route.body_field

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._takes(scope):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        while True:  # the edge's receive: over the limit, it raises and the edge answers 413
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
        parsed = self._parsed(scope, messages, body)
        if parsed is None:
            await self.app(scope, _replay(messages, receive), send)
            return
        await self._answer(scope, receive, send, parsed)

    def _takes(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope["path"] != SEARCH_PATH or scope["method"] != "POST":
            return False
        app = scope["app"]
        return bool(
            getattr(app.state, "search_lane", False)  # an app not made by create_app: its way
            and not scope.get("query_string")
            and not scope.get("root_path")
            and not getattr(app, "dependency_overrides", None)
        )

    def _parsed(self, scope: Scope, messages: list[Message], body: bytes) -> Any:
        """The validated body of an ordinary search, or None (the app's way)."""
        if not body or messages[-1]["type"] != "http.request":
            return None
        media = None
        seen: set[bytes] = set()
        for raw, value in scope["headers"]:
            name = raw.lower()
            if name in _COUNTED:
                if name in seen:
                    return None
                seen.add(name)
                if name == b"content-type":
                    media = value.lower()
        if media not in _JSON_TYPES:
            return None
        try:
            value, errors = self.field.validate(loads(body), {}, loc=("body",))
        except Exception:  # noqa: BLE001 - whatever it is, the app refuses it its own way
            return None
        return None if errors else value

    async def _answer(
        self, scope: Scope, receive: Receive, send: Send, body: schemas.SearchBody
    ) -> None:
        scope["route"] = self.route
        state = scope["app"].state
        try:
            principal = await state.authenticate(Request(scope, receive))
            caller = routes.Caller(principal, state.service, state.metrics, state.searches_on_loop)
            response = await routes.answer_search(caller, body, time.perf_counter())
        except GovernedMemoryError as error:
            response = domain_response(error, state.metrics)
        await response(scope, receive, send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` with the messages already read given again first."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


__all__ = ["SEARCH_PATH", "SearchLane"]
