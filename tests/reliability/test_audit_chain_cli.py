"""``gmem audit verify`` and ``gmem audit head`` as processes (issue 13), on a SQLite data
directory and a PostgreSQL database URL tampered with by raw SQL."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from governed_memory.service.chain_audit import EDITED, TRUNCATED
from governed_memory.store.postgres import PostgresStore
from governed_memory.store.sqlite import SQLiteStore
from tests.conftest import postgres_dsn
from tests.reliability.test_audit_chain import seeded, tamper
from tests.support.postgres import fresh_schema
from tests.support.processes import GMEM


def audit(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``gmem audit *args --data-dir data`` as a process, without GMEM_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    return subprocess.run(
        [GMEM, "audit", *args, "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def tamper_dir(data: Path, statement: str) -> None:
    store = SQLiteStore.in_directory(data)
    try:
        tamper(store, statement)
    finally:
        store.close()


def test_gmem_audit_verify_and_head_on_a_tampered_store(tmp_path: Path) -> None:
    """``gmem audit verify`` exits 0 with a count on a clean store and 1 naming the first
    bad position per tenant on a tampered one; ``gmem audit head`` prints each tenant's
    head, and a recorded head given back with --expect shows a deleted tail."""
    data = tmp_path / "data"
    data.mkdir()
    store = SQLiteStore.in_directory(data)
    seeded(store)
    store.close()
    clean = audit(data, "verify")
    assert (clean.returncode, clean.stdout, clean.stderr) == (
        0,
        "clean: 5 event(s) in 2 tenant(s)\n",
        "",
    )
    heads = audit(data, "head")
    assert heads.returncode == 0
    recorded = heads.stdout.split()
    assert [line.split(":")[:2] for line in recorded] == [["acme", "5"], ["globex", "3"]]
    as_json = json.loads(audit(data, "head", "--json").stdout)
    assert [(h["tenant_id"], h["events"]) for h in as_json] == [("acme", 4), ("globex", 1)]

    tamper_dir(data, "DELETE FROM events WHERE position = 5")
    tail = audit(data, "verify", "--expect", recorded[0], "--expect", recorded[1])
    assert tail.returncode == 1
    assert tail.stdout == f"broken: tenant acme, position 5: {TRUNCATED}\n"
    assert tail.stderr == (
        "gmem: error: the hash chain of 1 tenant(s) is broken; first: tenant acme, position 5\n"
    )
    tamper_dir(data, "UPDATE events SET version = 7 WHERE position = 3")
    both = audit(data, "verify")
    assert both.returncode == 1
    assert both.stdout == f"broken: tenant globex, position 3: {EDITED}\n"
    bad = audit(data, "verify", "--expect", "acme:5:nothex")
    assert (bad.returncode, bad.stdout) == (1, "")
    assert bad.stderr.startswith("gmem: error: --expect takes TENANT:POSITION:HASH")


def test_gmem_audit_verify_names_the_first_break_on_postgresql() -> None:
    """The same command on a PostgreSQL database URL: clean, then the tampered position."""
    dsn = postgres_dsn()
    assert dsn is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    command = [GMEM, "audit", "verify"]
    with fresh_schema(dsn) as url:
        store = PostgresStore(url)
        try:
            seeded(store)
            clean = subprocess.run(
                [*command, "--database-url", url], capture_output=True, text=True, env=env
            )
            assert (clean.returncode, clean.stdout) == (0, "clean: 5 event(s) in 2 tenant(s)\n")
            tamper(store, "UPDATE events SET actor = 'someone-else' WHERE position = 4")
        finally:
            store.close()
        broken = subprocess.run(
            [*command, "--database-url", url], capture_output=True, text=True, env=env
        )
    assert broken.returncode == 1
    assert broken.stdout == f"broken: tenant acme, position 4: {EDITED}\n"
