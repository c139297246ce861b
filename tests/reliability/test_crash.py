"""kill -9 of the real ``gmem serve`` under load loses nothing acknowledged (SPEC §4, §12).

The bounded version of ``make crash-test``; ``GMEM_LONG=1`` runs the long one documented in
docs/reliability.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.reliability.crashloop import CrashLoop, run

# The bounded runs below kill under load in every cycle, so each of them acknowledges writes
# whatever its seed draws; kills during start-up have their own test (the long run mixes both).


def test_sigkill_under_load_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """Three SIGKILL cycles: replay clean, no half-applied command, every ack exactly kept."""
    stats = run(3, workers=4, max_traffic_seconds=1.5, data_dir=tmp_path, startup_kill_rate=0)
    assert stats.failures == [], f"seed {stats.seed}: {stats.failures}"
    assert stats.acked_writes > 0
    assert stats.items > 0


def test_sigkill_of_every_worker_process_at_once_loses_no_acknowledged_write(
    tmp_path: Path,
) -> None:
    """``gmem serve --workers 2``: two processes writing one SQLite file, taking turns on
    its lock file, killed together mid-write; the same checks, the same outcome."""
    stats = run(
        2,
        workers=4,
        max_traffic_seconds=1.5,
        data_dir=tmp_path,
        serve_workers=2,
        startup_kill_rate=0,
    )
    assert stats.failures == [], f"seed {stats.seed}: {stats.failures}"
    assert stats.acked_writes > 0


@pytest.mark.parametrize("serve_workers", [1, 2])
def test_a_kill_while_the_server_starts_leaves_a_store_that_opens(
    tmp_path: Path, serve_workers: int
) -> None:
    """SIGKILL while the server starts leaves a store that opens and verifies: once it holds
    the store open (migrations checked, the master key's check value compared) and, with
    two worker processes, both run; the kill ends them all at once. A start-up that never
    gets there fails the cycle."""
    loop = CrashLoop(
        tmp_path / "data",
        workers=2,
        startup_kill_rate=1.0,
        seed=7,
        log=tmp_path / "server.log",
        serve_workers=serve_workers,
    )
    try:
        for _ in range(2):
            assert loop.cycle()
    finally:
        loop.server.kill()
    assert loop.stats.failures == []
    assert loop.stats.startup_kills == 2


@pytest.mark.skipif(os.environ.get("GMEM_LONG") != "1", reason="long run: set GMEM_LONG=1")
def test_fifty_crash_cycles_lose_nothing(tmp_path: Path) -> None:
    """The documented long run: 50 cycles, at least 10,000 acknowledged writes, FULL sync."""
    stats = run(50, workers=8, data_dir=tmp_path)
    assert stats.failures == [], f"seed {stats.seed}: {stats.failures}"
    assert stats.acked_writes >= 10_000
