"""``gmem import`` is safe to fail and to retry: an import refused for its master key
leaves the store bound to no key, so the import with the right key succeeds; a failed
import never removes a store another process wrote to meanwhile; an export naming one
idempotency record twice is refused before anything is written."""

from __future__ import annotations

import base64
import json
import os
import secrets
import sqlite3
import subprocess
import time
from pathlib import Path

from governed_memory import open_service
from governed_memory.apikeys import create_api_key, split_token, verify
from governed_memory.core.values import Scope, Trust
from tests.conftest import postgres_dsn
from tests.support.fakes import START, body, principal
from tests.support.postgres import fresh_schema
from tests.support.processes import GMEM

WRITER = principal()


def clean_env(master_key: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    if master_key is not None:
        env["GMEM_MASTER_KEY"] = master_key
    return env


def run(*args: str, master_key: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GMEM, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=clean_env(master_key),
    )


def new_master_key() -> str:
    return base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def exported(tmp_path: Path, master_key: str) -> Path:
    """An export of a store under ``master_key``, with one fact written with an
    idempotency key by an API key's holder."""
    service = open_service(data_dir=tmp_path / "source", master_key=master_key)
    try:
        scopes = frozenset({Scope.MEMORY_WRITE, Scope.MEMORY_READ})
        record, token = create_api_key("acme", None, scopes, Trust.TRUSTED, START, "bot")
        service.store.add_api_key(record)
        key_id, secret = split_token(token)
        writer = verify(service.store.api_key(key_id), secret, START)
        service.write(writer, body(id="m1"), idempotency_key="retry-1")
        dump = tmp_path / "log.jsonl"
        with dump.open("w", encoding="utf-8") as handle:
            for line in service.maintenance.export():
                handle.write(json.dumps(line) + "\n")
    finally:
        service.close()
    return dump


def test_an_import_refused_for_its_master_key_can_be_retried_with_the_right_one_on_sqlite(
    tmp_path: Path,
) -> None:
    """Into a migrated, empty SQLite store: the import under another master key fails,
    and the import under the export's master key then succeeds."""
    right = new_master_key()
    dump = exported(tmp_path, right)
    target = tmp_path / "target"
    assert run("migrate", "--data-dir", str(target)).returncode == 0
    wrong = run("import", str(dump), "--data-dir", str(target), master_key=new_master_key())
    assert wrong.returncode == 1
    assert "subject key failed authentication" in wrong.stderr
    done = run("import", str(dump), "--data-dir", str(target), master_key=right)
    assert done.returncode == 0, done.stderr
    assert "imported 1 event(s)" in done.stdout


def test_an_import_under_a_new_key_file_can_be_retried_and_the_file_is_named(
    tmp_path: Path,
) -> None:
    """Into a migrated SQLite store without a master key: the key file made for it fails
    the import, stays (the database was there before) and is named; the import under
    the export's master key then succeeds."""
    right = new_master_key()
    dump = exported(tmp_path, right)
    target = tmp_path / "target"
    assert run("migrate", "--data-dir", str(target)).returncode == 0
    wrong = run("import", str(dump), "--data-dir", str(target))
    assert wrong.returncode == 1
    assert "subject key failed authentication" in wrong.stderr
    assert f"{target / 'master.key'} was created for this store and stays" in wrong.stderr
    done = run("import", str(dump), "--data-dir", str(target), master_key=right)
    assert done.returncode == 0, done.stderr


def test_an_import_refused_for_its_master_key_can_be_retried_with_the_right_one_on_postgresql(
    tmp_path: Path,
) -> None:
    """Into an empty PostgreSQL schema: the import under another master key fails, and
    the import under the export's master key then succeeds."""
    dsn = postgres_dsn()
    assert dsn is not None
    right = new_master_key()
    dump = exported(tmp_path, right)
    with fresh_schema(dsn) as url:
        wrong = run("import", str(dump), "--database-url", url, master_key=new_master_key())
        assert wrong.returncode == 1
        assert "subject key failed authentication" in wrong.stderr
        done = run("import", str(dump), "--database-url", url, master_key=right)
        assert done.returncode == 0, done.stderr
        assert "imported 1 event(s)" in done.stdout


def opened(database: Path) -> bool:
    """Whether the store has been opened (its search settings are recorded)."""
    if not database.exists():
        return False
    try:
        with sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True) as conn:
            return bool(conn.execute("SELECT count(*) FROM store_meta").fetchone()[0])
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def test_a_writer_during_a_slow_failing_import_keeps_its_data(tmp_path: Path) -> None:
    """While an import still reads its export from a pipe, another process opens the new
    store and writes a fact; the import then fails, removes nothing, says so, and the
    fact is still there."""
    target = tmp_path / "target"
    importing = subprocess.Popen(
        [GMEM, "import", "-", "--data-dir", str(target)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    deadline = time.monotonic() + 60
    while not opened(target / "gmem.sqlite3"):
        assert time.monotonic() < deadline and importing.poll() is None
        time.sleep(0.05)
    writer = open_service(data_dir=target)
    try:
        writer.write(WRITER, body(id="m1", content="The customer prefers email."))
    finally:
        writer.close()
    _, err = importing.communicate("not an export record\n", timeout=120)
    assert importing.returncode == 1
    # refused for the bad line, or (had it not yet looked) for the store no longer empty
    assert "line 1 is not a valid export" in err or "needs an empty store" in err
    assert "nothing was removed" in err
    reader = open_service(data_dir=target)
    try:
        assert reader.get(WRITER, "m1").content == "The customer prefers email."
    finally:
        reader.close()


def test_an_export_naming_an_idempotency_record_twice_is_refused_and_can_be_retried(
    tmp_path: Path,
) -> None:
    """The same idempotency line twice fails the import at the second, naming it, and
    leaves nothing behind; the export without the repeat then imports."""
    master = new_master_key()
    dump = exported(tmp_path, master)
    lines = dump.read_text(encoding="utf-8").splitlines(keepends=True)
    first = next(n for n, line in enumerate(lines) if '"record": "idempotency"' in line)
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_text("".join([*lines[: first + 1], *lines[first:]]), encoding="utf-8")
    target = tmp_path / "target"
    done = run("import", str(doubled), "--data-dir", str(target), master_key=master)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"gmem: error: line {first + 2} repeats an idempotency key of a credential named "
        "on an earlier line"
    )
    assert not target.exists()
    done = run("import", str(dump), "--data-dir", str(target), master_key=master)
    assert done.returncode == 0, done.stderr
    assert "1 API key(s), 1 idempotency record(s)" in done.stdout
