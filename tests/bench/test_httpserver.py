"""The HTTP figures' rounds (1, 2, 4 worker processes) measure the same work: each round
serves its own copy of the loaded store, so one round's writes do not grow the scopes the
next round searches. Nothing here is about speed; the server and the load generator are
replaced by stand-ins that record what each round was served."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bench.workload import Workload

from bench import httpserver

STORED = 40  # workload items "loaded" into the store


@pytest.fixture
def rounds_seen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict[str, Any]]:
    """Stand-ins for ``gmem keys create``, ``gmem serve`` and the load generator: each
    served round records the files it was given, then "writes" into its store."""
    seen: list[dict[str, Any]] = []

    def create_key(data_dir: Path, tenant: str) -> str:
        (data_dir / f"key-{tenant}").write_text("created before the rounds")
        return f"key-{tenant}"

    @contextlib.contextmanager
    def serving(data_dir: Path, workers: int = 1, pids: list[int] | None = None) -> Iterator[str]:
        seen.append(
            {
                "dir": data_dir,
                "workers": workers,
                "files": sorted(p.name for p in data_dir.iterdir()),
            }
        )
        yield "http://stand-in"
        (data_dir / f"written-by-round-{workers}").write_text("a round's writes")

    monkeypatch.setattr(httpserver, "create_key", create_key)
    monkeypatch.setattr(httpserver, "serving", serving)
    monkeypatch.setattr(httpserver, "load", lambda url, clients: {"per_s": 1.0})
    return seen


def test_every_round_serves_the_store_as_loaded_and_keyed(
    rounds_seen: list[dict[str, Any]], tmp_path: Path
) -> None:
    data_dir = tmp_path / "http"
    data_dir.mkdir()
    (data_dir / "gmem.sqlite3").write_text("the loaded store")

    results = httpserver.measure(data_dir, Workload(), STORED, 4, 8, rounds=(1, 2, 4))

    assert [r["workers"] for r in results] == [1, 2, 4]
    assert [r["workers"] for r in rounds_seen] == [1, 2, 4]
    loaded = sorted(p.name for p in data_dir.iterdir())
    assert "gmem.sqlite3" in loaded
    assert any(name.startswith("key-") for name in loaded)
    for served in rounds_seen:
        assert served["files"] == loaded  # no earlier round's writes
        assert served["dir"] != data_dir
        assert not served["dir"].exists()  # each round's copy is removed after it
    assert not any(name.startswith("written-by-round") for name in loaded)
