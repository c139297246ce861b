"""The calls agents make most, answered without the framework's dispatch when nothing is
unusual: ``POST /v1/search``, ``POST /v1/memories`` and ``PUT /v1/memories/{id}``.

A request through FastAPI passes, besides the service, the exception and exit-stack
middlewares, the router (matching routes through the app's include), the strict route's
checks, the body's reading and parsing, and the solving of its dependencies, each a few
coroutine frames and a few dozen microseconds: about a third of a short search's CPU in
the process, and on the event loop, which every write's thread also needs. So the edge
(:mod:`.edge`: access log, metrics, 500s, rate-limit headers and the body limit stay its)
hands every request to this ASGI app over the app, which answers one of those three
routes itself when the request is an ordinary one:

- the route's method and a path its own pattern matches, no query string, no root path,
  no dependency overrides on the app;
- the ``Content-Type``, ``Authorization`` and ``Idempotency-Key`` headers each at most once,
  the content type ``application/json`` (with ``charset=utf-8`` at most);
- the path's parameters and the headers the route declares valid for it, and a non-empty
  body that is strict JSON (:func:`.strict.loads`) and valid for the route's own body field
  (each checked by the same validators FastAPI would call).

Anything else goes to the app as before, with the body read so far handed back to it
unchanged (nothing has been counted or recorded yet): every refusal of a malformed or
unusual request is the framework's and the strict route's, as it always was. An ordinary
request is then authenticated by the app's own authenticator (which counts the rate limit,
refuses a named tenant and records the key's use) and answered by the route's own
function, called as the framework calls it (on the loop if it is ``async``, in the thread
pool if not); a domain error of either becomes the problem the app's handler makes of it
(:func:`.problems.domain_response`). The order of refusals is the route's: its request
checks and the JSON first, then authentication, then validation (which the lane does
before authenticating only to choose its path: an invalid request goes the app's way and
is refused there after authentication, as before). Answers are the same bytes either way
(``tests/http/test_lane.py``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from fastapi.dependencies.utils import request_params_to_args
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from governed_memory.errors import GovernedMemoryError
from governed_memory.http import routes
from governed_memory.http.problems import domain_response
from governed_memory.http.strict import loads

#: The routes the lane answers, by method and path template.
ROUTES = (("POST", "/v1/search"), ("POST", "/v1/memories"), ("PUT", "/v1/memories/{id}"))
_JSON_TYPES = frozenset({b"application/json", b"application/json; charset=utf-8"})
_COUNTED = frozenset({b"content-type", b"authorization", b"idempotency-key"})


@dataclass(frozen=True)
class _Hot:
    """One route the lane answers, and what calling its function takes."""

    route: APIRoute
    templated: bool  # its path has parameters (matched by its pattern, not by equality)
    body: str  # the name the function takes the body by
    caller: str  # ... and the authenticated caller by
    coroutine: bool  # its function is ``async`` (called on the loop), else in the pool

    @classmethod
    def of(cls, route: APIRoute) -> _Hot:
        dependant = route.dependant
        (caller,) = dependant.dependencies  # the API key's caller, and nothing else
        assert route.body_field is not None and not dependant.query_params
        return cls(
            route,
            bool(route.param_convertors),
            route.body_field.name,
            str(caller.name),
            inspect.iscoroutinefunction(route.endpoint),
        )


def _hot_routes() -> dict[str, list[_Hot]]:
    """The router's routes of :data:`ROUTES`, by method."""
    found: dict[str, list[_Hot]] = {}
    for route in routes.router.routes:
        if not isinstance(route, APIRoute):
            continue
        for method in sorted(route.methods or ()):
            if (method, route.path) in ROUTES:
                found.setdefault(method, []).append(_Hot.of(route))
    assert sum(map(len, found.values())) == len(ROUTES), "a lane route is not in routes.py"
    return found


class Lane:
    """The ASGI app over the app that answers ordinary searches and writes; anything else
    it passes on.

    The app's ``state.lane`` false sends every request through the app (the tests compare
    the two)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.routes = _hot_routes()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        taken = self._takes(scope)
        if taken is None:
            await self.app(scope, receive, send)
            return
        hot, path_params = taken
        messages: list[Message] = []
        while True:  # the edge's receive: over the limit, it raises and the edge answers 413
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
        arguments = self._arguments(hot, scope, messages, body, path_params)
        if arguments is None:
            await self.app(scope, _replay(messages, receive), send)
            return
        await self._answer(hot, scope, receive, send, arguments)

    def _takes(self, scope: Scope) -> tuple[_Hot, dict[str, Any]] | None:
        """The route an ordinary request would go to, and its path's parameters."""
        if scope["type"] != "http":
            return None
        taken = self._route(scope["method"], scope["path"])
        if taken is None:
            return None
        app = scope["app"]
        if (
            not getattr(app.state, "lane", False)  # an app not made by create_app: its way
            or scope.get("query_string")
            or scope.get("root_path")
            or getattr(app, "dependency_overrides", None)
        ):
            return None
        return taken

    def _route(self, method: str, path: str) -> tuple[_Hot, dict[str, Any]] | None:
        """The lane's route for ``method`` and ``path``, and the path's parameters."""
        for hot in self.routes.get(method, ()):
            if not hot.templated:
                if path == hot.route.path:
                    return hot, {}
                continue
            matched = hot.route.path_regex.match(path)
            if matched is not None:
                convertors = hot.route.param_convertors
                return hot, {k: convertors[k].convert(v) for k, v in matched.groupdict().items()}
        return None

    def _arguments(
        self,
        hot: _Hot,
        scope: Scope,
        messages: list[Message],
        body: bytes,
        path_params: dict[str, Any],
    ) -> dict[str, Any] | None:
        """The route function's arguments for an ordinary request (but the caller), or None
        (the app's way)."""
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
        dependant = hot.route.dependant
        try:
            arguments, errors = request_params_to_args(dependant.path_params, path_params)
            if dependant.header_params and not errors:
                headers, errors = request_params_to_args(
                    dependant.header_params, Headers(scope=scope)
                )
                arguments.update(headers)
            if errors:
                return None
            assert hot.route.body_field is not None
            arguments[hot.body], errors = hot.route.body_field.validate(
                loads(body), {}, loc=("body",)
            )
        except Exception:  # noqa: BLE001 - whatever it is, the app refuses it its own way
            return None
        return None if errors else arguments

    async def _answer(
        self, hot: _Hot, scope: Scope, receive: Receive, send: Send, arguments: dict[str, Any]
    ) -> None:
        scope["route"] = hot.route
        state = scope["app"].state
        endpoint = hot.route.endpoint
        try:
            principal = await state.authenticate(Request(scope, receive))
            arguments[hot.caller] = routes.Caller(
                principal, state.service, state.metrics, state.searches_on_loop
            )
            if hot.coroutine:
                response = await endpoint(**arguments)
            else:
                response = await run_in_threadpool(endpoint, **arguments)
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


__all__ = ["ROUTES", "Lane"]
