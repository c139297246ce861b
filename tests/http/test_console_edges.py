"""The review console's edges without a browser: cookies behind HTTPS, the sign-in form's
token, sessions that hold no secret, and the setting that turns the console off.

The console's pages themselves are tested in a real browser (tests/console/)."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx

from governed_memory.apikeys import split_token
from governed_memory.http.console.sessions import MAX_LIFETIME, Sessions, digest_of
from tests.support.api import MakeApi
from tests.support.fakes import FakeClock


def sign_in_form(client: httpx.Client, **headers: str) -> str:
    """The sign-in page's CSRF token (its cookie is now in ``client``)."""
    page = client.get("/console/login", headers=headers)
    assert page.status_code == 200
    match = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert match is not None
    return match.group(1)


def test_behind_https_the_session_cookie_is_secure(make_api: MakeApi) -> None:
    """A request that came over HTTPS (as a trusted proxy says) gets a Secure cookie, as
    HttpOnly and SameSite=Strict as ever."""
    api = make_api()
    token = api.key()["Authorization"].split()[1]
    https = {"X-Forwarded-Proto": "https"}
    page = api.client.get("/console/login", headers=https)
    assert "secure" in page.headers["set-cookie"].lower()  # the sign-in form's cookie too
    match = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert match is not None
    # The test speaks plain HTTP to the app, so it hands the Secure cookie back itself.
    cookie = f"gmem_console_login={match.group(1)}"
    answer = httpx.post(
        f"{api.client.base_url}/console/login",
        data={"api_key": token, "csrf_token": match.group(1)},
        headers=https | {"Cookie": cookie},
    )
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"].lower()
    assert "gmem_console=" in cookie
    assert all(
        flag in cookie for flag in ("secure", "httponly", "samesite=strict", "path=/console")
    )


def test_over_plain_http_the_cookie_is_not_marked_secure(make_api: MakeApi) -> None:
    api = make_api()
    token = api.key()["Authorization"].split()[1]
    csrf = sign_in_form(api.client)
    answer = api.client.post("/console/login", data={"api_key": token, "csrf_token": csrf})
    assert answer.status_code == 303
    assert "secure" not in answer.headers["set-cookie"].lower()


def test_a_sign_in_without_the_forms_token_is_refused(make_api: MakeApi) -> None:
    """A sign-in posted by another site's page (no token, or not the cookie's) starts no
    session, even with a good key."""
    api = make_api()
    token = api.key()["Authorization"].split()[1]
    for data in ({"api_key": token}, {"api_key": token, "csrf_token": "guessed"}):
        answer = httpx.post(f"{api.client.base_url}/console/login", data=data)
        assert answer.status_code == 403
        assert "gmem_console=" not in answer.headers.get("set-cookie", "")


def test_a_session_keeps_neither_the_key_nor_its_own_id(make_api: MakeApi) -> None:
    """The stored session holds the key's id, a hash of its secret's stored hash, and the
    session id only as a digest: a dump of it lets nobody sign in."""
    api = make_api()
    token = api.key()["Authorization"].split()[1]
    key_id, secret = split_token(token)
    record = api.store.api_key(key_id)
    assert record is not None
    sessions = Sessions(api.store, api.clock, timedelta(minutes=15))
    session_id, session = sessions.start(record)
    dump = repr(api.store.console_session(digest_of(session_id)))
    assert key_id in dump
    for kept_out in (secret, record.secret_hash, session_id, session.csrf):
        assert kept_out not in dump
    assert sessions.resume(session_id) is not None
    assert sessions.resume(session_id + "x") is None


def test_a_session_ends_after_its_lifetime_however_busy(make_api: MakeApi) -> None:
    api = make_api()
    record = api.store.api_key(split_token(api.key()["Authorization"].split()[1])[0])
    assert record is not None
    clock = FakeClock()
    sessions = Sessions(api.store, clock, timedelta(minutes=15))
    session_id, _ = sessions.start(record)
    for _ in range(int(MAX_LIFETIME / timedelta(minutes=10))):
        assert sessions.resume(session_id) is not None
        clock.advance(minutes=10)
    assert sessions.resume(session_id) is None
    assert api.store.console_session(digest_of(session_id)) is None


def test_the_console_can_be_turned_off(make_api: MakeApi) -> None:
    """GMEM_CONSOLE_ENABLED=false: no console route, no stylesheet; the API is unchanged."""
    api = make_api(console_enabled=False)
    assert api.client.get("/console/login").status_code == 404
    assert api.client.get("/console/static/console.css").status_code == 404
    assert api.client.get("/health").status_code == 200


def test_over_the_rate_limit_the_console_answers_a_page_with_retry_after(
    make_api: MakeApi,
) -> None:
    """A console page or sign-in over the key's limit is a 429 HTML page naming the
    problem, with Retry-After and the console's headers, never the API's JSON."""
    api = make_api(rate_limit_requests=3)
    token = api.key()["Authorization"].split()[1]
    csrf = sign_in_form(api.client)
    answer = api.client.post("/console/login", data={"api_key": token, "csrf_token": csrf})
    assert answer.status_code == 303  # the first request of the window
    statuses = [api.client.get("/console/quarantine").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    over = api.client.get("/console/audit")
    assert over.status_code == 429
    assert over.headers["content-type"].startswith("text/html")
    assert int(over.headers["retry-after"]) > 0
    assert over.headers["x-frame-options"] == "DENY"
    assert "Too many requests" in over.text
    assert 'role="alert"' in over.text

    again = httpx.Client(base_url=api.client.base_url)
    csrf = sign_in_form(again)
    refused = again.post("/console/login", data={"api_key": token, "csrf_token": csrf})
    assert (refused.status_code, refused.headers["content-type"][:9]) == (429, "text/html")
    assert int(refused.headers["retry-after"]) > 0
    assert "gmem_console=" not in refused.headers.get("set-cookie", "")
    again.close()


def test_with_secure_cookies_set_the_cookies_are_secure_whatever_the_scheme(
    make_api: MakeApi,
) -> None:
    """GMEM_CONSOLE_SECURE_COOKIES=true: behind a TLS proxy uvicorn does not trust, the
    request looks like plain HTTP, and the cookies are Secure all the same."""
    api = make_api(console_secure_cookies=True)
    page = api.client.get("/console/login")
    assert "secure" in page.headers["set-cookie"].lower()


def test_the_promoted_notice_names_a_memory_only_by_its_id(make_api: MakeApi) -> None:
    """The notice after a promote echoes the query's ``memory`` only when it is an id: any
    other text (a spoofed message) is not shown at all."""
    api = make_api()
    token = api.key()["Authorization"].split()[1]
    csrf = sign_in_form(api.client)
    assert (
        api.client.post("/console/login", data={"api_key": token, "csrf_token": csrf}).status_code
        == 303
    )
    named = api.client.get("/console/quarantine", params={"done": "promoted", "memory": "m-42"})
    assert named.status_code == 200
    assert 'class="notice"' in named.text
    assert 'Promoted <a href="/console/memories/m-42">m-42</a>' in named.text
    spoof = "Your key expired, call 555-0100"
    spoofed = api.client.get("/console/quarantine", params={"done": "promoted", "memory": spoof})
    assert spoofed.status_code == 200
    assert 'class="notice"' not in spoofed.text
    assert "555-0100" not in spoofed.text
