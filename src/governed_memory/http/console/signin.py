"""Signing in and out of the console.

The sign-in form posts one field, ``api_key``. It carries its own CSRF token, the same
random value in a hidden field and in a cookie only this site sends back (a page of
another site cannot read the cookie nor make the browser send it). A key that passes the
API's own check starts a session; the answer says nothing more than the API's 401 would.
"""

from __future__ import annotations

import logging
import secrets
from typing import Annotated

from fastapi import APIRouter, Form, Request
from starlette.responses import Response

from governed_memory.apikeys import split_token, verify
from governed_memory.errors import AuthenticationError, GovernedMemoryError, RateLimited
from governed_memory.http.console.access import (
    HOME,
    LOGIN,
    LOGIN_COOKIE,
    PREFIX,
    SESSION_COOKIE,
    ConsoleDep,
    SignedOut,
    Throttled,
    require_csrf,
    see_other,
    set_cookie,
    signed_in,
)
from governed_memory.http.console.pages import problem_of, render
from governed_memory.http.console.sessions import same_token

log = logging.getLogger("governed_memory.console")

router = APIRouter(include_in_schema=False)

FormText = Annotated[str, Form()]


def _login_page(
    request: Request, status: int = 200, error: GovernedMemoryError | None = None
) -> Response:
    """The sign-in form with a fresh token, in the form and in its cookie."""
    token = secrets.token_urlsafe(32)
    problem = None if error is None else problem_of(error)
    response = render("login.html", status, csrf_token=token, problem=problem)
    set_cookie(request, response, LOGIN_COOKIE, token, LOGIN)
    return response


@router.get(PREFIX)
@router.get(f"{PREFIX}/")
def home() -> Response:
    """The console starts at the review queue (or at sign-in, signed out)."""
    return see_other(HOME)


@router.get(LOGIN)
def login_form(request: Request) -> Response:
    """The sign-in page; a reviewer already signed in goes on to the queue."""
    try:
        signed_in(request)
    except SignedOut:
        return _login_page(request)
    return see_other(HOME)


@router.post(LOGIN)
def login(
    request: Request, console: ConsoleDep, api_key: FormText = "", csrf_token: FormText = ""
) -> Response:
    """Exchange an API key for a session: the cookie, and on to the queue."""
    if not same_token(csrf_token, request.cookies.get(LOGIN_COOKIE, "")) or not csrf_token:
        log.info("console sign-in", extra={"outcome": "csrf"})
        error = AuthenticationError("the sign-in form expired: sign in again")
        return _login_page(request, 403, error)
    try:
        key_id, secret = split_token(api_key.strip())
        record = console.api_keys.api_key(key_id)
        verify(record, secret, console.service.clock.now())
    except AuthenticationError as error:
        log.info("console sign-in", extra={"outcome": "refused"})
        return _login_page(request, 401, error)
    assert record is not None  # verify refused a missing key
    try:
        console.limiter.check(key_id, request.scope.setdefault("state", {}))
    except RateLimited as error:
        raise Throttled(None, error) from None
    session_id, _ = console.sessions.start(record)
    log.info("console sign-in", extra={"outcome": "ok", "key_id": key_id})
    response = see_other(HOME)
    set_cookie(request, response, SESSION_COOKIE, session_id, PREFIX)
    response.delete_cookie(LOGIN_COOKIE, path=LOGIN)
    return response


@router.post(f"{PREFIX}/logout")
def logout(request: Request, console: ConsoleDep, csrf_token: FormText = "") -> Response:
    """End the session (with its CSRF token: no other site can sign a reviewer out)."""
    reviewer = signed_in(request)
    try:
        require_csrf(reviewer, csrf_token)
    except GovernedMemoryError as error:
        return render("problem.html", 403, reviewer=reviewer, problem=problem_of(error))
    console.sessions.end(request.cookies.get(SESSION_COOKIE))
    log.info("console sign-out", extra={"key_id": reviewer.session.key_id})
    response = see_other(LOGIN)
    response.delete_cookie(SESSION_COOKIE, path=PREFIX)
    return response


__all__ = ["router"]
