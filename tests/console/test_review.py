"""A reviewer works the quarantine queue in a browser: what the API would allow, and no more."""

from __future__ import annotations

import re
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.console.conftest import Console

REVIEW = "memory:write,memory:read,memory:review,audit:read"
HOSTILE = '<script>alert("x")</script><b>bold</b> & <img src=x onerror=alert(1)>'


def api_get(console: Console, token: str, memory_id: str) -> dict[str, Any]:
    """The memory as ``GET /v1/memories/{id}`` shows it to ``token``."""
    response = httpx.get(
        f"{console.url}/v1/memories/{memory_id}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    item: dict[str, Any] = response.json()
    return item


def row(console: Console, memory_id: str) -> Any:
    return console.page.locator(f'tr[data-memory-id="{memory_id}"]')


def test_promote_and_reject_from_the_queue_change_the_item_over_the_api(
    console: Console,
) -> None:
    """Promote on one row, reject with a reason on another: the API then shows the first
    active and verified, the second rejected with that reason in its history."""
    writer = console.key(principal="writer", trust="untrusted")
    reviewer = console.key(REVIEW, principal="reviewer")
    first = console.write(writer, content="The customer prefers email.")
    second = console.write(writer, content="The customer is a robot.", subject_id="customer-2")
    console.sign_in(reviewer)
    expect(row(console, first.id)).to_contain_text("The customer prefers email.")

    row(console, first.id).get_by_role("button", name="Promote").click()
    expect(console.page.get_by_role("status")).to_contain_text(f"Promoted {first.id}")
    expect(row(console, first.id)).to_have_count(0)
    row(console, second.id).get_by_label(re.compile("Reason")).fill("not a fact about anyone")
    row(console, second.id).get_by_role("button", name="Reject").click()
    expect(console.page.get_by_role("status")).to_contain_text(f"Rejected {second.id}")

    promoted = api_get(console, reviewer, first.id)
    assert (promoted["status"], promoted["trust"], promoted["version"]) == ("active", "verified", 2)
    rejected = api_get(console, reviewer, second.id)
    assert rejected["status"] == "rejected"
    history = httpx.get(
        f"{console.url}/v1/memories/{second.id}/history",
        headers={"Authorization": f"Bearer {reviewer}"},
        timeout=30,
    ).json()["events"]
    assert history[-1]["reason"] == "not a fact about anyone"


def test_a_key_without_the_review_scope_sees_no_promote_button_and_gets_403_posting_anyway(
    console: Console,
) -> None:
    """A reader sees the queue (content withheld) with no review buttons; a promotion it
    posts anyway, CSRF token and all, is refused with the API's 403 and changes nothing."""
    writer = console.key(principal="writer", trust="untrusted")
    reader = console.key("memory:read", principal="reader")
    item = console.write(writer)
    console.sign_in(reader)
    expect(row(console, item.id)).to_contain_text("(withheld)")
    expect(console.page.get_by_role("button", name="Promote")).to_have_count(0)
    console.go(f"/console/memories/{item.id}")
    expect(console.page.get_by_role("button", name="Promote")).to_have_count(0)

    csrf = console.page.locator('input[name="csrf_token"]').first.get_attribute("value")
    response = console.page.request.post(
        f"{console.url}/console/memories/{item.id}/promote",
        form={"csrf_token": csrf or "", "expected_version": "1"},
        max_redirects=0,
    )
    assert response.status == 403
    assert "Permission denied" in response.text()
    assert console.status(item.id) == "quarantined"


def test_self_promotion_is_refused_with_its_message(console: Console) -> None:
    """A reviewer who wrote the memory gets the API's 403, its title and detail on the page,
    and the memory stays quarantined."""
    both = console.key(principal="alice", trust="untrusted")
    item = console.write(both)
    console.sign_in(both)
    with console.page.expect_response(re.compile(r"/promote$")) as answer:
        row(console, item.id).get_by_role("button", name="Promote").click()
    assert answer.value.status == 403
    alert = console.page.get_by_role("alert")
    expect(alert).to_contain_text("Self-review is not allowed")
    expect(alert).to_contain_text(f"memory {item.id!r} was written by this principal")
    assert console.status(item.id) == "quarantined"


def test_a_stale_version_is_refused_as_the_api_refuses_it(console: Console) -> None:
    """The form carries the version the reviewer saw: if the memory changed meanwhile, the
    promotion is the API's 409 version conflict."""
    writer = console.key(principal="writer", trust="untrusted")
    reviewer = console.key(REVIEW, principal="reviewer")
    other = console.key(REVIEW, principal="other-reviewer")
    item = console.write(writer)
    console.sign_in(reviewer)
    expect(row(console, item.id)).to_have_count(1)
    console.service.reject(console.principal(other), item.id, 1)
    with console.page.expect_response(re.compile(r"/promote$")) as answer:
        row(console, item.id).get_by_role("button", name="Promote").click()
    assert answer.value.status == 409
    expect(console.page.get_by_role("alert")).to_contain_text("Version conflict")


def test_content_with_script_and_html_shows_as_text(console: Console) -> None:
    """Markup in a memory is shown character for character, on the queue and the item page;
    nothing of it runs or becomes an element."""
    writer = console.key(principal="writer", trust="untrusted")
    reviewer = console.key(REVIEW, principal="reviewer")
    item = console.write(writer, content=HOSTILE)
    dialogs: list[str] = []
    console.page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    console.sign_in(reviewer)
    cell = row(console, item.id).locator("td.content")
    expect(cell).to_have_text(HOSTILE)
    assert cell.locator("script, b, img").count() == 0
    console.go(f"/console/memories/{item.id}")
    content = console.page.locator('[data-role="content"]')
    expect(content).to_have_text(HOSTILE)
    assert content.locator("script, b, img").count() == 0
    assert console.page.locator("script").count() == 0
    assert dialogs == []


def test_the_item_page_shows_provenance_history_and_a_correction_beside_its_original(
    console: Console,
) -> None:
    """A quarantined correction's page shows its details, the memory it would supersede
    side by side, the words changed, and each event of its history."""
    writer = console.key(principal="writer", trust="untrusted")
    trusted = console.key(principal="crm-sync")
    reviewer = console.key(REVIEW, principal="reviewer")
    original = console.write(trusted, trust="trusted", content="Prefers email before noon.")
    correction = console.write(
        writer, content="Prefers phone before noon.", supersedes_id=original.id
    )
    console.sign_in(reviewer)
    console.go(f"/console/memories/{correction.id}")
    page = console.page
    expect(page.locator(".facts")).to_contain_text("crm · ticket-1")
    expect(page.locator(".facts")).to_contain_text("quarantined")
    expect(page.locator('[data-role="superseded"]')).to_have_text("Prefers email before noon.")
    expect(page.locator('[data-role="diff"] del')).to_have_text("email")
    expect(page.locator('[data-role="diff"] ins')).to_have_text("phone")
    expect(page.locator(".timeline li")).to_have_count(1)
    expect(page.locator(".timeline li").first).to_contain_text("memory.written")

    page.get_by_role("button", name="Promote").click()
    expect(page.get_by_role("status")).to_contain_text("Promoted")
    expect(page.locator(".timeline li")).to_have_count(2)
    assert console.status(original.id) == "superseded"


def test_the_queue_lists_newest_first_filters_and_pages(console: Console) -> None:
    """The newest write heads the queue and the oldest ends its last page; filters by
    agent, purpose, kind and subject narrow the queue."""
    writer = console.key(principal="writer", trust="untrusted")
    reviewer = console.key(REVIEW, principal="reviewer")
    written = []
    for n in range(27):
        written.append(console.write(writer, subject_id=f"customer-{n % 3}", content=f"n {n}"))
        console.clock.advance(seconds=1)
    skill = console.write(writer, kind="skill", purpose="billing", content="how to refund")
    console.sign_in(reviewer)
    rows = console.page.locator("tr[data-memory-id]")
    expect(rows).to_have_count(25)
    shown = [rows.nth(n).get_attribute("data-memory-id") for n in range(25)]
    assert shown == [skill.id, *[item.id for item in reversed(written)][:24]]
    console.page.get_by_role("link", name="Next page").click()
    expect(rows).to_have_count(3)
    shown = [rows.nth(n).get_attribute("data-memory-id") for n in range(3)]
    assert shown == [item.id for item in reversed(written[:3])]

    console.go("/console/quarantine")
    console.page.get_by_label("Kind").select_option("skill")
    console.page.get_by_role("button", name="Filter").click()
    expect(console.page.locator("tr[data-memory-id]")).to_have_count(1)
    expect(row(console, skill.id)).to_contain_text("how to refund")
    console.go("/console/quarantine?purpose=support&subject_id=customer-1")
    expect(console.page.locator("tr[data-memory-id]")).to_have_count(9)
    console.go("/console/quarantine?agent_id=other-bot")
    expect(console.page.locator(".empty")).to_contain_text("Nothing waits for review")
