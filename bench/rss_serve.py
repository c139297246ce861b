"""Resident memory of a fresh ``gmem serve`` over a loaded store, step by step.

``python -m bench.rss_serve DATA_DIR STORED`` starts ``gmem serve`` (one worker) over
``DATA_DIR``, which holds workload items ``0 .. STORED-1`` (``bench.loading``), and prints
one JSON object: the server's RSS (``/proc/PID/status``: VmRSS, RssAnon, RssFile) once it
is ready, after its first search, after 200 searches and after its first write. The
tokenizer's tables are built on the first write, so the steps show what they cost.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench import httpserver
from bench.workload import Workload

FIELDS = ("VmRSS", "RssAnon", "RssFile")


def _rss(pid: int) -> dict[str, float]:
    found: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            name = line.split(":")[0]
            if name in FIELDS:
                found[name] = round(int(line.split()[1]) / 1024, 1)
    return found


def measure(data_dir: Path, stored: int) -> dict[str, Any]:
    """RSS of a fresh server at each step, in MiB."""
    workload = Workload()
    first = workload.item(0)
    scope = [
        item for item in workload.items(0, min(stored, 5_000)) if item.tenant_id == first.tenant_id
    ]
    token = httpserver.create_key(data_dir, first.tenant_id)
    rnd = random.Random(7)
    steps: dict[str, Any] = {"stored": stored}
    pids: list[int] = []
    with (
        httpserver.serving(data_dir, pids=pids) as url,
        httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as client,
    ):
        pid = pids[0]
        time.sleep(1)
        steps["ready"] = _rss(pid)

        def search() -> None:
            item = rnd.choice(scope)
            body = {
                "agent_id": item.agent_id,
                "purpose": item.purpose,
                "query": workload.terms(rnd),
            }
            client.post("/v1/search", json=body).raise_for_status()

        search()
        steps["first_search"] = _rss(pid)
        for _ in range(200):
            search()
        steps["after_200_searches"] = _rss(pid)
        body = workload.item(90_000_000).body()
        del body["id"], body["expected_version"]
        client.post("/v1/memories", json=body).raise_for_status()  # a new id on every run
        steps["first_write"] = _rss(pid)
    return steps


if __name__ == "__main__":
    print(json.dumps(measure(Path(sys.argv[1]), int(sys.argv[2]))))
