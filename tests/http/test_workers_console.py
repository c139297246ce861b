"""The review console under ``gmem serve --workers N``: a session is the store's, not a
worker's, so a reviewer stays signed in whichever worker answers, and a sign-out ends the
session for all of them."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.http.test_workers import workers_serving
from tests.support.processes import create_key

REVIEW = "memory:write,memory:read,memory:review,audit:read"
STARTED = re.compile(r"Started server process \[(\d+)\]")


def _sign_in(url: str, token: str) -> tuple[dict[str, str], str]:
    """The session cookie of a sign-in with ``token``, and the CSRF token of its pages."""
    form = httpx.get(f"{url}/console/login")
    (login_token,) = re.findall(r'name="csrf_token" value="([^"]+)"', form.text)
    answer = httpx.post(
        f"{url}/console/login",
        data={"api_key": token, "csrf_token": login_token},
        cookies={"gmem_console_login": login_token},
    )
    assert (answer.status_code, answer.headers["location"]) == (303, "/console/quarantine")
    cookies = {"gmem_console": answer.cookies["gmem_console"]}
    page = httpx.get(f"{url}/console/quarantine", cookies=cookies)
    (csrf,) = set(re.findall(r'name="csrf_token" value="([^"]+)"', page.text))
    return cookies, csrf


def _queue_statuses(url: str, cookies: dict[str, str], times: int) -> set[int]:
    """The statuses of ``times`` requests for the queue, each on a connection of its own
    (so the kernel hands them to any worker)."""
    return {
        httpx.get(f"{url}/console/quarantine", cookies=cookies).status_code for _ in range(times)
    }


def _replace(pid: int, log: Path, started: int) -> None:
    """Kill worker ``pid`` and wait until its replacement has started."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while len(STARTED.findall(log.read_text())) <= started:
        assert time.monotonic() < deadline, "no replacement worker started"
        time.sleep(0.1)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_console_session_outlives_every_worker_it_began_on_and_sign_out_ends_it_everywhere(
    tmp_path: Path, backend: str
) -> None:
    """Signed in once, a reviewer's pages answer on fresh connections to any of two workers,
    and still after both workers that existed at sign-in were killed and replaced (nothing
    of the session was in a worker); after sign-out every worker sends it to sign-in."""
    with workers_serving(tmp_path, backend, workers=2) as (client, env, log):
        url = str(client.base_url)
        token = create_key(tmp_path / "data", REVIEW, env=env, principal="reviewer")
        cookies, csrf = _sign_in(url, token)
        assert _queue_statuses(url, cookies, 15) == {200}

        original = [int(pid) for pid in STARTED.findall(log.read_text())]
        assert len(original) == 2
        for pid in original:
            _replace(pid, log, len(STARTED.findall(log.read_text())))
        assert _queue_statuses(url, cookies, 15) == {200}

        out = httpx.post(f"{url}/console/logout", data={"csrf_token": csrf}, cookies=cookies)
        assert (out.status_code, out.headers["location"]) == (303, "/console/login")
        for _ in range(10):
            answer = httpx.get(f"{url}/console/quarantine", cookies=cookies)
            assert (answer.status_code, answer.headers["location"]) == (303, "/console/login")
