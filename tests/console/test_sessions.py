"""Signing in and out, sessions, CSRF, tenants, forgetting and the feed, in a browser."""

from __future__ import annotations

import logging
import re

import pytest
from playwright.sync_api import expect

from governed_memory.apikeys import split_token
from tests.console.conftest import Console

REVIEW = "memory:write,memory:read,memory:review,audit:read"


def test_a_reviewer_signs_in_with_an_api_key_and_signs_out(console: Console) -> None:
    """The key is exchanged for an HttpOnly, SameSite=Strict session cookie; signing out
    ends the session, and the console's pages then lead back to the sign-in page."""
    reviewer = console.key(REVIEW, principal="reviewer")
    console.sign_in(reviewer)
    expect(console.page.locator(".who")).to_contain_text("tenant acme · reviewer")
    (cookie,) = [c for c in console.page.context.cookies() if c["name"] == "gmem_console"]
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/console")
    assert reviewer not in cookie["value"]
    assert console.page.evaluate("document.cookie") == ""  # no script can read it

    console.page.get_by_role("button", name="Sign out").click()
    console.page.wait_for_url(f"{console.url}/console/login")
    console.go("/console/quarantine")
    assert console.page.url == f"{console.url}/console/login"


def test_a_wrong_revoked_or_malformed_key_is_refused_at_sign_in(console: Console) -> None:
    """A key the API would refuse is refused with the API's 401 title; nothing opens."""
    token = console.key(REVIEW, principal="reviewer")
    console.store.revoke_api_key(split_token(token)[0], console.clock.now())
    for attempt in (token, "not-a-key", token[:-4] + "AAAA"):
        console.page.goto(f"{console.url}/console/login")
        console.page.get_by_label("API key").fill(attempt)
        with console.page.expect_response(re.compile(r"/console/login$")) as answer:
            console.page.get_by_role("button", name="Sign in").click()
        assert answer.value.status == 401
        expect(console.page.get_by_role("alert")).to_contain_text("Authentication required")
    assert console.page.context.cookies() == [] or all(
        c["name"] != "gmem_console" for c in console.page.context.cookies()
    )


def test_nothing_but_the_sign_in_page_and_its_assets_is_reachable_signed_out(
    console: Console,
) -> None:
    """Every page redirects to sign-in; every post too, and changes nothing."""
    writer = console.key(principal="writer", trust="untrusted")
    item = console.write(writer)
    for path in (
        "/console/quarantine",
        f"/console/memories/{item.id}",
        "/console/audit",
        "/console/subjects/customer-1",
    ):
        response = console.page.request.get(f"{console.url}{path}", max_redirects=0)
        assert (response.status, response.headers["location"]) == (303, "/console/login"), path
    for path in (f"/console/memories/{item.id}/promote", "/console/subjects/customer-1/forget"):
        response = console.page.request.post(f"{console.url}{path}", form={}, max_redirects=0)
        assert response.status == 303, path
    assert console.status(item.id) == "quarantined"
    assert console.page.request.get(f"{console.url}/console/static/console.css").ok
    assert console.page.request.get(f"{console.url}/console/login").ok


def test_every_page_sends_a_strict_policy_and_refuses_framing(console: Console) -> None:
    """No script may run, nothing loads from another origin, no page may be framed."""
    reviewer = console.key(REVIEW, principal="reviewer")
    response = console.go("/console/login")
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert "script-src" not in policy and "unsafe-inline" not in policy
    assert response.headers["x-frame-options"] == "DENY"
    console.sign_in(reviewer)
    for path in ("/console/quarantine", "/console/audit", "/console/subjects/customer-1"):
        response = console.go(path)
        assert response.headers["x-frame-options"] == "DENY", path
        assert response.headers["content-security-policy"] == policy, path
    assert console.page.locator("script").count() == 0


def test_a_post_without_the_csrf_token_is_refused(console: Console) -> None:
    """A signed-in browser's post without the session's token (another site's form) is a
    403 and changes nothing, for reviews, forgetting and signing out."""
    writer = console.key(principal="writer", trust="untrusted")
    reviewer = console.key(principal="reviewer")
    item = console.write(writer)
    console.sign_in(reviewer)
    posts = {
        f"/console/memories/{item.id}/promote": {"expected_version": "1"},
        f"/console/memories/{item.id}/reject": {"expected_version": "1", "csrf_token": "forged"},
        "/console/subjects/customer-1/forget": {"confirm": "customer-1"},
        "/console/logout": {},
    }
    for path, form in posts.items():
        response = console.page.request.post(f"{console.url}{path}", form=form, max_redirects=0)
        assert response.status == 403, path
        assert "CSRF token" in response.text(), path
    assert console.status(item.id) == "quarantined"
    console.go("/console/quarantine")
    assert console.page.url == f"{console.url}/console/quarantine"  # still signed in


def test_another_tenants_memory_is_not_found(console: Console) -> None:
    """A memory of another tenant is 404 on its page and to a promotion, as over the API."""
    stranger = console.key(principal="mallory", tenant="globex", trust="untrusted")
    reviewer = console.key(principal="reviewer")
    theirs = console.write(stranger)
    console.sign_in(reviewer)
    response = console.go(f"/console/memories/{theirs.id}")
    assert response.status == 404
    expect(console.page.get_by_role("alert")).to_contain_text("Not found")
    csrf = console.page.locator('input[name="csrf_token"]').first.get_attribute("value")
    answer = console.page.request.post(
        f"{console.url}/console/memories/{theirs.id}/promote",
        form={"csrf_token": csrf or "", "expected_version": "1"},
        max_redirects=0,
    )
    assert answer.status == 404
    assert console.status(theirs.id, tenant="globex") == "quarantined"
    console.go("/console/quarantine")
    expect(console.page.locator("tr[data-memory-id]")).to_have_count(0)


def test_forget_needs_the_retyped_subject_id_and_shows_the_receipt(console: Console) -> None:
    """A mistyped id forgets nothing (422); the exact id forgets the subject and shows the
    receipt: how many memories went, and the event's position."""
    writer = console.key(principal="writer", trust="untrusted")
    officer = console.key("memory:read,memory:review,subject:forget", principal="dpo")
    first = console.write(writer, subject_id="customer-9")
    console.write(writer, subject_id="customer-9", content="Another note.")
    console.sign_in(officer)
    console.go("/console/subjects/customer-9")
    expect(console.page.locator("tr[data-memory-id]")).to_have_count(2)
    page = console.page
    page.get_by_label("Subject id to forget").fill("customer-8")
    with page.expect_response(re.compile(r"/forget$")) as answer:
        page.get_by_role("button", name="Forget subject").click()
    assert answer.value.status == 422
    expect(page.get_by_role("alert")).to_contain_text("retype the subject id")
    assert console.status(first.id) == "quarantined"

    page.get_by_label("Subject id to forget").fill("customer-9")
    page.get_by_role("button", name="Forget subject").click()
    expect(page.locator('[data-role="affected"]')).to_have_text("2")
    position = page.locator('[data-role="position"]').inner_text()
    assert position.isdigit()
    assert console.status(first.id) == "deleted"


def test_a_key_without_the_forget_scope_sees_no_forget_form(console: Console) -> None:
    reviewer = console.key(REVIEW, principal="reviewer")
    console.sign_in(reviewer)
    console.go("/console/subjects/customer-1")
    expect(console.page.get_by_role("button", name="Forget subject")).to_have_count(0)


def test_an_idle_session_must_sign_in_again(console: Console) -> None:
    """Past the idle timeout (900 s by default) the session is gone; use keeps it alive."""
    reviewer = console.key(REVIEW, principal="reviewer")
    console.sign_in(reviewer)
    console.clock.advance(seconds=800)
    console.go("/console/audit")
    assert console.page.url == f"{console.url}/console/audit"
    console.clock.advance(seconds=800)
    console.go("/console/quarantine")
    assert console.page.url == f"{console.url}/console/quarantine"
    console.clock.advance(seconds=901)
    console.go("/console/quarantine")
    assert console.page.url == f"{console.url}/console/login"


def test_a_revoked_key_ends_its_sessions_at_the_next_request(console: Console) -> None:
    reviewer = console.key(REVIEW, principal="reviewer")
    console.sign_in(reviewer)
    console.store.revoke_api_key(split_token(reviewer)[0], console.clock.now())
    console.go("/console/quarantine")
    assert console.page.url == f"{console.url}/console/login"


def test_the_audit_feed_shows_the_latest_events_first_content_free_and_filters_by_type(
    console: Console,
) -> None:
    writer = console.key(principal="writer", trust="untrusted")
    reviewer = console.key("memory:read,memory:review,audit:read", principal="reviewer")
    secret = "The customer's card ends in 4242."
    first = console.write(writer, content=secret)
    console.write(writer, content="Another note.")
    console.service.promote(console.principal(reviewer), first.id, 1)
    console.sign_in(reviewer)
    console.go("/console/audit")
    rows = console.page.locator("tr[data-position]")
    expect(rows).to_have_count(3)
    assert secret not in console.page.content()
    positions = [int(rows.nth(n).get_attribute("data-position") or "") for n in range(3)]
    assert positions == sorted(positions, reverse=True)
    expect(rows.first).to_contain_text("memory.promoted")
    console.page.get_by_label("Before position").fill(str(positions[0]))
    console.page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(2)
    expect(rows.first).to_have_attribute("data-position", str(positions[1]))
    console.page.get_by_label("Before position").fill("")
    console.page.get_by_label("Event type").select_option("memory.promoted")
    console.page.get_by_role("button", name="Filter").click()
    rows = console.page.locator("tr[data-position]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(first.id)
    expect(rows.first).to_contain_text("reviewer")


def test_console_actions_are_logged_and_counted_without_content(
    console: Console, caplog: pytest.LogCaptureFixture
) -> None:
    """A console promotion logs its action, key and memory id, never the content, and the
    metrics count it as an API promotion would."""
    writer = console.key(principal="writer", trust="untrusted")
    reviewer = console.key(REVIEW, principal="reviewer")
    secret = "Secret text that must not be logged."
    item = console.write(writer, content=secret)
    caplog.set_level(logging.INFO)
    console.sign_in(reviewer)
    console.page.locator(f'tr[data-memory-id="{item.id}"]').get_by_role(
        "button", name="Promote"
    ).click()
    expect(console.page.get_by_role("status")).to_contain_text("Promoted")
    actions = [r for r in caplog.records if r.getMessage() == "console action"]
    assert [(r.action, r.outcome, r.memory_id) for r in actions] == [  # type: ignore[attr-defined]
        ("promote", "ok", item.id)
    ]
    assert all(secret not in repr(vars(record)) for record in caplog.records)
    metrics = console.page.request.get(f"{console.url}/metrics").text()
    assert re.search(
        r'gmem_http_requests_total\{.*route="/console/memories/\{memory_id\}/promote"', metrics
    )
    assert secret not in metrics


def test_the_audit_feed_pages_back_to_older_events(console: Console) -> None:
    """A page shows the latest 100 events; "Older events" goes on to those before them."""
    writer = console.key(principal="writer", trust="trusted")
    reviewer = console.key("memory:read,audit:read", principal="reviewer")
    first = console.write(writer, trust="trusted", content="the first note")
    for n in range(100):
        console.write(writer, trust="trusted", content=f"note {n}")
    console.sign_in(reviewer)
    console.go("/console/audit")
    rows = console.page.locator("tr[data-position]")
    expect(rows).to_have_count(100)
    expect(rows.last).not_to_contain_text(first.id)
    console.page.get_by_role("link", name="Older events").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(first.id)
    expect(console.page.get_by_role("link", name="Older events")).to_have_count(0)
