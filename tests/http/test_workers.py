"""``gmem serve --workers N`` (docs/operations.md): several processes, one service.

Every acknowledged write is kept, a key's rate limit is one limit across the workers,
``/metrics`` counts every worker's requests and exactly one worker runs the expiry loop.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from governed_memory.http.shared import LeaderLock, SharedWindowLimiter
from governed_memory.http.workers import restart_delay
from tests.conftest import postgres_dsn
from tests.support.fakes import write_body
from tests.support.postgres import fresh_schema
from tests.support.processes import create_key, free_port, serving, start_serve, wait_ready

LIMIT = 60
LEADS = "this process now runs the expiry worker"


# -- the shared parts, in one process ----------------------------------------------------


def test_a_key_gets_its_limit_once_however_many_workers_count_it(tmp_path: Path) -> None:
    """Four limiters on one file (four workers), eight threads: exactly ``limit`` pass."""
    path = tmp_path / "rate.sqlite3"
    limiters = [SharedWindowLimiter(path, 100, 3600) for _ in range(4)]
    allowed: list[bool] = []

    def hammer(limiter: SharedWindowLimiter) -> None:
        for _ in range(50):
            allowed.append(limiter.hit("key-1").allowed)

    threads = [threading.Thread(target=hammer, args=(limiters[n % 4],)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert allowed.count(True) == 100
    assert limiters[0].hit("key-2").remaining == 99  # another key has a window of its own
    for limiter in limiters:
        limiter.close()


def test_a_shared_window_starts_afresh_when_the_next_window_begins(tmp_path: Path) -> None:
    now = [1_000_000.0]
    first = SharedWindowLimiter(tmp_path / "rate.sqlite3", 2, 60, clock=lambda: now[0])
    second = SharedWindowLimiter(tmp_path / "rate.sqlite3", 2, 60, clock=lambda: now[0])
    assert [first.hit("k").allowed, second.hit("k").allowed, first.hit("k").allowed] == [
        True,
        True,
        False,
    ]
    now[0] += 60
    decision = second.hit("k")
    assert decision.allowed
    assert decision.remaining == 1
    first.close()
    second.close()


def test_a_late_request_of_an_older_window_neither_resets_nor_escapes_the_newer_one(
    tmp_path: Path,
) -> None:
    """Limit 3: window 0 is used up, then A uses up window 1; a request B stamped with
    window 0 (its clock read late) counts in window 1 and is refused, and A's next request
    is refused too: the shared window never moves back."""
    now = {"a": 0.0, "b": 0.0}
    a = SharedWindowLimiter(tmp_path / "rate.sqlite3", 3, 60, clock=lambda: now["a"])
    b = SharedWindowLimiter(tmp_path / "rate.sqlite3", 3, 60, clock=lambda: now["b"])
    assert [a.hit("k").allowed for _ in range(3)] == [True, True, True]
    now["a"] = 61.0
    assert [a.hit("k").allowed for _ in range(3)] == [True, True, True]
    late = b.hit("k")  # b's clock still says window 0
    assert not late.allowed and late.remaining == 0
    assert not a.hit("k").allowed
    now["b"] = 121.0
    assert b.hit("k").allowed  # window 2 starts afresh
    a.close()
    b.close()


def test_one_holder_of_the_expiry_lock_at_a_time_and_the_next_takes_over(
    tmp_path: Path,
) -> None:
    path = tmp_path / "expiry.lock"
    first, second = LeaderLock(path), LeaderLock(path)
    assert first.held()
    assert not second.held()
    first.release()
    assert second.held()
    second.release()


def test_the_expiry_lock_of_a_killed_leader_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "expiry.lock"
    code = (
        "import pathlib, time; from governed_memory.http.shared import LeaderLock;"
        f"assert LeaderLock(pathlib.Path({str(path)!r})).held();"
        "print('held', flush=True); time.sleep(60)"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "held"
            follower = LeaderLock(path)
            assert not follower.held()
            holder.kill()
            holder.wait()
            assert follower.held()
            follower.release()
        finally:
            holder.kill()


# -- gmem serve --workers N ----------------------------------------------------------------


@contextmanager
def workers_serving(
    tmp_path: Path, backend: str, workers: int = 3
) -> Iterator[tuple[httpx.Client, dict[str, str], Path]]:
    """``gmem serve --workers N`` on ``backend``; a client, the environment and the log."""
    env = os.environ | {
        "GMEM_WORKERS": str(workers),
        "GMEM_RATE_LIMIT_REQUESTS": str(LIMIT),
        "GMEM_RATE_LIMIT_WINDOW_SECONDS": "3600",
        "GMEM_EXPIRY_INTERVAL_SECONDS": "0.2",
        "GMEM_MASTER_KEY": "A" * 43 + "=",
    }
    with contextmanager(_database)(backend) as url:
        if url is not None:
            env["GMEM_DATABASE_URL"] = url
        log = tmp_path / "serve.log"
        with serving(tmp_path / "data", log, env=env) as client:
            yield client, env, log
        assert "Traceback" not in log.read_text()


def _database(backend: str) -> Iterator[str | None]:
    if backend == "sqlite":
        yield None
        return
    dsn = postgres_dsn()
    assert dsn is not None
    with fresh_schema(dsn) as url:
        yield url


def _write_and_search(
    url: str, token: str, writer: int, acknowledged: list[tuple[str, str]]
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        for n in range(20):
            memory_id = f"w{writer}-{n}"
            content = f"Customer {writer} prefers coffee number {n}."
            body = write_body(id=None, content=content, subject_id=f"customer-{writer}")
            if client.put(f"/v1/memories/{memory_id}", json=body).status_code == 201:
                acknowledged.append((token, memory_id))
            found = client.post(
                "/v1/search",
                json={"agent_id": "support-bot", "purpose": "support", "query": "coffee"},
            )
            assert found.status_code == 200


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_several_workers_keep_every_acknowledged_write_and_share_the_rate_limit(
    tmp_path: Path, backend: str
) -> None:
    with workers_serving(tmp_path, backend) as (client, env, log):
        url = str(client.base_url)
        tokens = [create_key(tmp_path / "data", env=env) for _ in range(7)]
        acknowledged: list[tuple[str, str]] = []
        writers = [
            threading.Thread(target=_write_and_search, args=(url, token, n, acknowledged))
            for n, token in enumerate(tokens[:6])
        ]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join()
        assert len(acknowledged) == 6 * 20
        for token, memory_id in acknowledged:  # read back on fresh connections: any worker
            reader = {"Authorization": f"Bearer {token}"}
            assert httpx.get(f"{url}/v1/memories/{memory_id}", headers=reader).status_code == 200

        limited = {"Authorization": f"Bearer {tokens[6]}"}
        statuses = [
            httpx.get(f"{url}/v1/memories/none", headers=limited).status_code
            for _ in range(LIMIT + 30)
        ]
        assert statuses.count(429) == 30
        assert statuses.count(404) == LIMIT

        metrics = httpx.get(f"{url}/metrics").text
        assert _metric(metrics, "/v1/memories/{id}", "PUT", "201") == 6 * 20
        assert _metric(metrics, "/v1/memories/{id}", "GET", "429") == 30
        time.sleep(1)  # several expiry intervals
        text = log.read_text()
    assert len(set(re.findall(r"Started server process \[(\d+)\]", text))) == 3
    assert text.count(LEADS) == 1


def _metric(text: str, route: str, method: str, status: str) -> float:
    labels = f'method="{method}",route="{route}",status="{status}"'
    for line in text.splitlines():
        if line.startswith("gmem_http_requests_total{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_when_the_expiry_leader_dies_another_worker_takes_the_lead(tmp_path: Path) -> None:
    with workers_serving(tmp_path, "sqlite", workers=2) as (client, _, log):
        deadline = time.monotonic() + 10
        while LEADS not in log.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        (leader,) = re.findall(r'now runs the expiry worker", "pid": (\d+)', log.read_text())
        os.kill(int(leader), signal.SIGKILL)
        while log.read_text().count(LEADS) < 2:
            assert time.monotonic() < deadline + 20
            time.sleep(0.1)
        pids = re.findall(r'now runs the expiry worker", "pid": (\d+)', log.read_text())
        assert pids[1] != leader
        # The supervisor replaces the killed worker; the survivor may take the lead first.
        while len(re.findall(r"Started server process \[(\d+)\]", log.read_text())) < 3:
            assert time.monotonic() < deadline + 40
            time.sleep(0.1)
        assert "exited (-9); starting another" in log.read_text()
        assert httpx.get(f"{client.base_url}/health/live").status_code == 200  # new connection


@pytest.mark.parametrize("workers", ["0", "65", "two"])
def test_an_impossible_number_of_workers_is_one_line(tmp_path: Path, workers: str) -> None:
    done = subprocess.run(
        [
            Path(sys.executable).parent / "gmem",
            "serve",
            "--data-dir",
            tmp_path,
            "--workers",
            workers,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("gmem: error: GMEM_WORKERS:")
    assert done.stderr.count("\n") == 1


def test_a_store_that_cannot_open_is_reported_once_not_by_every_worker(tmp_path: Path) -> None:
    env = os.environ | {"GMEM_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    done = subprocess.run(
        [Path(sys.executable).parent / "gmem", "serve", "--workers", "4", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 1
    assert done.stderr.count("gmem: error:") == 1
    assert "Started server process" not in done.stderr


def _gone(pid: int) -> bool:
    """Whether the process ``pid`` has ended (a zombie counts as ended)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return status.rsplit(")", 1)[1].split()[0] == "Z"


def test_workers_shut_down_when_their_supervisor_is_killed(tmp_path: Path) -> None:
    """SIGKILL to the supervisor (it can pass nothing on) still ends every worker within a
    few seconds, and the port stops answering."""
    env = os.environ | {"GMEM_WORKERS": "2", "GMEM_MASTER_KEY": "A" * 43 + "="}
    port, log = free_port(), tmp_path / "serve.log"
    process = start_serve(tmp_path / "data", log, port, env)
    try:
        wait_ready(f"http://127.0.0.1:{port}", process, log)
        deadline = time.monotonic() + 20
        while (
            len(pids := set(re.findall(r"Started server process \[(\d+)\]", log.read_text()))) < 2
        ):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        process.kill()
        process.wait()
        deadline = time.monotonic() + 10
        while not all(_gone(int(pid)) for pid in pids):
            assert time.monotonic() < deadline, "a worker outlived its supervisor"
            time.sleep(0.1)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/health/live", timeout=2)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_worker_that_keeps_dying_is_restarted_ever_more_slowly() -> None:
    """0.5 s after the first quick death, doubling with each, at most 30 s."""
    assert [restart_delay(n) for n in range(9)] == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    assert restart_delay(10_000) == 30
