"""The console works with the keyboard alone, and every field has a label."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.console.conftest import Console

REVIEW = "memory:read,memory:review,subject:forget,audit:read"
UNLABELLED = """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
    .filter(field => field.labels.length === 0).map(field => field.name)"""


def test_a_reviewer_signs_in_and_promotes_with_the_keyboard_alone(console: Console) -> None:
    """The key field has the focus; Enter signs in; Tab reaches the first row's Promote
    button (past the skip link, the menu and the filters); Enter promotes."""
    writer = console.key(principal="writer", trust="untrusted")
    reviewer = console.key(REVIEW, principal="reviewer")
    item = console.write(writer)
    page = console.page
    console.go("/console/login")
    expect(page.get_by_label("API key")).to_be_focused()
    page.keyboard.type(reviewer)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{console.url}/console/quarantine")
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent").startswith("Promote"):
            break
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text(f"Promoted {item.id}")
    assert console.status(item.id) == "active"


def test_every_field_of_every_page_has_a_label(console: Console) -> None:
    writer = console.key(principal="writer", trust="untrusted")
    reviewer = console.key(REVIEW, principal="reviewer")
    item = console.write(writer)
    console.go("/console/login")
    assert console.page.evaluate(UNLABELLED) == []
    console.sign_in(reviewer)
    for path in (
        "/console/quarantine",
        f"/console/memories/{item.id}",
        "/console/subjects/customer-1",
        "/console/audit",
    ):
        console.go(path)
        assert console.page.evaluate(UNLABELLED) == [], path
