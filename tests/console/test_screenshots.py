"""The screenshots of docs/console.md, taken of the real console in the browser.

Every run takes them (into the test's folder) and checks them; with
``GMEM_CONSOLE_SCREENSHOTS=1`` they replace the ones in docs/console/ (docs/console.md
says how). Each shows what the page it pictures must show.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from playwright.sync_api import expect

from tests.console.conftest import DOCS_SCREENSHOTS, Console

REVIEW = "memory:write,memory:read,memory:review,subject:forget,audit:read"
PNG = b"\x89PNG\r\n\x1a\n"
#: The most a documentation screenshot may weigh.
MAX_BYTES = 150_000


def shoot(console: Console, name: str, folder: Path, *, full_page: bool = False) -> Path:
    """A PNG of the browser's window (or the whole page), named ``name``; at most
    :data:`MAX_BYTES`."""
    path = folder / f"{name}.png"
    console.page.screenshot(
        path=str(path), animations="disabled", caret="hide", full_page=full_page
    )
    data = path.read_bytes()
    assert data.startswith(PNG) and len(data) <= MAX_BYTES, (name, len(data))
    width, height = struct.unpack(">II", data[16:24])
    assert width == 1040 and (full_page or height == 620), (width, height)
    return path


def folder_for(tmp_path: Path) -> Path:
    if os.environ.get("GMEM_CONSOLE_SCREENSHOTS") == "1":
        DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        return DOCS_SCREENSHOTS
    return tmp_path


def test_the_documentation_screenshots_show_each_page(pictured: Console, tmp_path: Path) -> None:
    """Sign-in, the queue, a correction with its diff, a refusal, the forget receipt and the
    audit feed, each pictured once it shows what docs/console.md says it does."""
    console, folder = pictured, folder_for(tmp_path)
    writer = console.key(principal="support-bot-key", trust="untrusted")
    crm = console.key(principal="crm-sync")
    reviewer = console.key(REVIEW, principal="reviewer")
    original = console.write(crm, trust="trusted", content="Prefers email before noon.")
    correction = console.write(
        writer,
        content="Prefers phone calls before noon.",
        supersedes_id=original.id,
        provenance={"source": "chat", "ref": "conversation-88"},
    )
    console.write(
        writer,
        subject_id="customer-2",
        kind="preference",
        content='Signature: <b>VIP</b> <script>alert("hi")</script>',
        confidence=0.6,
    )
    console.write(writer, subject_id="customer-3", content="Asked to be called Sam.")

    console.go("/console/login")
    shoot(console, "sign-in", folder)
    console.sign_in(reviewer)
    expect(console.page.locator("tr[data-memory-id]")).to_have_count(3)
    shoot(console, "quarantine", folder)

    console.go(f"/console/memories/{correction.id}")
    expect(console.page.locator('[data-role="diff"] ins')).to_have_text("phone calls")
    shoot(console, "correction", folder, full_page=True)

    own = console.write(reviewer, content="A note the reviewer wrote.", subject_id="customer-4")
    console.go(f"/console/memories/{own.id}")
    console.page.get_by_role("button", name="Promote").click()
    expect(console.page.get_by_role("alert")).to_contain_text("Self-review is not allowed")
    shoot(console, "refusal", folder)

    console.go("/console/subjects/customer-3")
    console.page.get_by_label("Subject id to forget").fill("customer-3")
    console.page.get_by_role("button", name="Forget subject").click()
    expect(console.page.locator('[data-role="affected"]')).to_have_text("1")
    shoot(console, "forget-receipt", folder)

    console.go("/console/audit")
    expect(console.page.locator("tr[data-position]")).to_have_count(6)
    shoot(console, "audit", folder)
