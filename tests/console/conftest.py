"""The review console in a real browser: Playwright driving the system's Chromium.

The browser is Debian's ``chromium`` (``GMEM_TEST_CHROMIUM`` names another executable);
Playwright never downloads one. Without it these tests skip on a workstation and fail in
CI (``CI=true``), where ``.ci/run`` installs it. Each test serves the real app over a
fresh store of each SQL backend, with a clock the test moves.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from governed_memory.apikeys import split_token
from governed_memory.core.model import MemoryItem, Principal
from governed_memory.ports import Store
from governed_memory.service import MemoryService
from tests.conftest import make_store
from tests.support.api import ALL_MEMORY_SCOPES, add_key, serve_app
from tests.support.fakes import FakeClock, body

#: Where ``GMEM_CONSOLE_SCREENSHOTS=1`` writes the screenshots docs/console.md shows.
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"


def chromium_path() -> str:
    """The system Chromium, or skip (fail in CI) when there is none."""
    path = os.environ.get("GMEM_TEST_CHROMIUM") or shutil.which("chromium")
    if path is None:
        reason = "needs Debian's chromium (apt-get install chromium) or GMEM_TEST_CHROMIUM"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser tests: {reason}")
        pytest.skip(reason)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium per test module. Not per session: Playwright's synchronous
    API keeps an event loop running in this thread while it is open, and the tests after
    these (asyncio.run) need the thread back."""
    executable = chromium_path()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        yield launched
        launched.close()


@dataclass
class Console:
    """A served app, its store and clock, and a browser page for one test."""

    url: str
    service: MemoryService
    store: Store
    clock: FakeClock
    page: Page

    def key(
        self,
        scopes: str = ALL_MEMORY_SCOPES,
        *,
        principal: str,
        tenant: str = "acme",
        trust: str = "trusted",
        agents: str = "*",
    ) -> str:
        """A new API key's token (``principal`` names its person)."""
        _, token = add_key(
            self.store,
            tenant,
            scopes,
            agents=agents,
            trust=trust,
            now=self.clock.now(),
            principal=principal,
        )
        return token

    def write(self, token: str, **overrides: Any) -> MemoryItem:
        """Write a memory as the key's principal through the service (untrusted by
        default: it lands in quarantine)."""
        fields = body(**({"trust": "untrusted"} | overrides))
        return self.service.write(self.principal(token), fields).item

    def principal(self, token: str) -> Principal:
        """The principal of a key this test made."""
        record = self.store.api_key(split_token(token)[0])
        assert record is not None
        return record.principal()

    def status(self, memory_id: str, tenant: str = "acme") -> str:
        """The memory's stored status."""
        state = self.store.get(tenant, memory_id)
        assert state is not None
        return state.status.value

    def sign_in(self, token: str) -> None:
        """Sign in through the sign-in form."""
        self.page.goto(f"{self.url}/console/login")
        self.page.get_by_label("API key").fill(token)
        self.page.get_by_role("button", name="Sign in").click()
        self.page.wait_for_url(f"{self.url}/console/quarantine")

    def go(self, path: str) -> Any:
        """Open a console page; the response of its navigation."""
        return self.page.goto(f"{self.url}{path}")


def serve_console(
    backend: str, browser: Browser, tmp_path: Path, viewport: dict[str, int] | None = None
) -> Iterator[Console]:
    """The app over a fresh store of ``backend``, and a fresh browser context."""
    with ExitStack() as stack:
        store = stack.enter_context(contextmanager(make_store)(backend, tmp_path))
        clock = FakeClock()
        served = serve_app(tmp_path / secrets.token_hex(4), stack, store=store, clock=clock)
        context = browser.new_context(viewport=viewport or {"width": 1100, "height": 720})
        stack.callback(context.close)
        page = context.new_page()
        page.set_default_timeout(15_000)
        yield Console(served.url, served.service, store, clock, page)


@pytest.fixture(params=["sqlite", "postgres"])
def console(request: pytest.FixtureRequest, browser: Browser, tmp_path: Path) -> Iterator[Console]:
    """The console over each SQL backend in turn."""
    yield from serve_console(request.param, browser, tmp_path)


@pytest.fixture
def pictured(browser: Browser, tmp_path: Path) -> Iterator[Console]:
    """The console over SQLite in the window size of the documentation's screenshots."""
    yield from serve_console("sqlite", browser, tmp_path, {"width": 1040, "height": 620})


__all__ = ["DOCS_SCREENSHOTS", "Console", "browser", "console", "pictured", "serve_console"]
