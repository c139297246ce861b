"""Who is at the console: the session cookie, the sign-in form's token, the CSRF check.

:class:`Console` is what the console's routes share (on ``app.state.console``): the
service, the key store, the sessions, the limiter and the metrics. :func:`signed_in` is
the dependency of every page but the sign-in page: without a live session it raises
:class:`SignedOut`, which answers with a redirect to the sign-in page. A signed-in request
counts against its key's rate limit and names its key in the access log, as over the API;
over the limit, :class:`Throttled` answers a page (429, ``Retry-After``), not JSON.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from starlette.responses import RedirectResponse, Response

from governed_memory.config import Settings
from governed_memory.core.model import Principal
from governed_memory.errors import PermissionDenied, RateLimited
from governed_memory.http.access_log import KEY_ID_STATE
from governed_memory.http.console.pages import SECURITY_HEADERS, problem_of, render
from governed_memory.http.console.sessions import Session, Sessions, same_token
from governed_memory.http.limits import FixedWindowLimiter
from governed_memory.observability import Metrics
from governed_memory.ports import Credentials
from governed_memory.service import MemoryService

log = logging.getLogger("governed_memory.console")

PREFIX = "/console"
LOGIN = f"{PREFIX}/login"
HOME = f"{PREFIX}/quarantine"
#: The session cookie (its value: a random id) and the sign-in form's token cookie.
SESSION_COOKIE = "gmem_console"
LOGIN_COOKIE = "gmem_console_login"
#: Where a form may send the reviewer back to: a console page of this origin.
_BACK = re.compile(r"/console/[A-Za-z0-9/_.:%?=&+-]*")


@dataclass
class Console:
    """What every console route needs, built once by :func:`governed_memory.http.console.
    install`."""

    service: MemoryService
    api_keys: Credentials
    sessions: Sessions
    limiter: FixedWindowLimiter
    metrics: Metrics | None


@dataclass(frozen=True)
class Reviewer:
    """The signed-in caller of one request: its session and its key's principal."""

    session: Session
    principal: Principal


class SignedOut(Exception):
    """No live session: the answer is the sign-in page."""


class Throttled(Exception):
    """The reviewer's key is over its rate limit: the answer is a page saying so, 429 with
    ``Retry-After``, not the API's JSON problem."""

    def __init__(self, reviewer: Reviewer | None, error: RateLimited) -> None:
        super().__init__(error.detail)
        self.reviewer = reviewer
        self.error = error


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def signed_in(request: Request) -> Reviewer:
    """The reviewer of a live session (its idle time restarted), or :class:`SignedOut`."""
    console = console_of(request)
    found = console.sessions.resume(request.cookies.get(SESSION_COOKIE))
    if found is None:
        raise SignedOut
    session, principal = found
    state = request.scope.setdefault("state", {})
    state[KEY_ID_STATE] = session.key_id
    reviewer = Reviewer(session, principal)
    try:
        console.limiter.check(session.key_id, state)
    except RateLimited as error:
        raise Throttled(reviewer, error) from None
    return reviewer


ReviewerDep = Annotated[Reviewer, Depends(signed_in)]
ConsoleDep = Annotated[Console, Depends(console_of)]


def require_csrf(reviewer: Reviewer, token: str | None) -> None:
    """Refuse a post whose form did not carry the session's CSRF token."""
    if not same_token(token, reviewer.session.csrf):
        raise PermissionDenied("the form's CSRF token is missing or wrong: reload the page")


def back_to(target: str | None, default: str) -> str:
    """A console page to go back to after a post: ``target`` if it is one, else
    ``default`` (never another origin)."""
    if target and _BACK.fullmatch(target) and "//" not in target:
        return target
    return default


def see_other(location: str) -> Response:
    """A 303 redirect with the console's headers (the browser then GETs ``location``)."""
    return RedirectResponse(location, status_code=303, headers=SECURITY_HEADERS)


def secure(request: Request) -> bool:
    """Whether cookies are ``Secure``: the request came over HTTPS, or the settings say so
    whatever the scheme (``GMEM_CONSOLE_SECURE_COOKIES``)."""
    settings: Settings = request.app.state.settings
    return settings.console_secure_cookies or request.url.scheme == "https"


def set_cookie(request: Request, response: Response, name: str, value: str, path: str) -> None:
    """A cookie no script can read, sent back only by this site's own requests."""
    response.set_cookie(
        name, value, path=path, httponly=True, samesite="strict", secure=secure(request)
    )


def on_signed_out(request: Request, exc: Exception) -> Response:
    """The answer to :class:`SignedOut`: the sign-in page, the session cookie cleared."""
    response = see_other(LOGIN)
    response.delete_cookie(SESSION_COOKIE, path=PREFIX)
    return response


def on_throttled(request: Request, exc: Exception) -> Response:
    """The answer to :class:`Throttled`: the problem as a page, with ``Retry-After``."""
    assert isinstance(exc, Throttled)
    response = render("problem.html", 429, reviewer=exc.reviewer, problem=problem_of(exc.error))
    response.headers["Retry-After"] = str(exc.error.retry_after)
    return response


#: What an id must look like to be logged: a path may carry any text, and a log line never
#: repeats a caller's text.
_LOGGABLE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def note(action: str, reviewer: Reviewer, outcome: str, **ids: object) -> None:
    """The content-free log line of one console action: what, by which key, the outcome,
    and the ids it concerned (numbers, or ids of the shape of ids; anything else is left
    out)."""
    shown = {
        name: value
        for name, value in ids.items()
        if isinstance(value, int) or (isinstance(value, str) and _LOGGABLE_ID.fullmatch(value))
    }
    log.info(
        "console action",
        extra={"action": action, "key_id": reviewer.session.key_id, "outcome": outcome, **shown},
    )


__all__ = [
    "HOME",
    "LOGIN",
    "LOGIN_COOKIE",
    "PREFIX",
    "SESSION_COOKIE",
    "Console",
    "ConsoleDep",
    "Reviewer",
    "ReviewerDep",
    "SignedOut",
    "Throttled",
    "back_to",
    "console_of",
    "note",
    "on_signed_out",
    "on_throttled",
    "require_csrf",
    "see_other",
    "set_cookie",
    "signed_in",
]
