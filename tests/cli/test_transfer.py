"""Moving a store with ``gmem export`` and ``gmem import``: a failed import leaves nothing
behind (no store file, no new master.key), and a store moved this way keeps its API keys
and idempotency records."""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
from pathlib import Path

from governed_memory import open_service
from tests.conftest import postgres_dsn
from tests.support.fakes import body, principal, write_body
from tests.support.postgres import fresh_schema
from tests.support.processes import GMEM, create_key, serving

WRITER = principal()


def run(*args: str, master_key: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    if master_key is not None:
        env["GMEM_MASTER_KEY"] = master_key
    return subprocess.run(
        [GMEM, *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )


def exported(tmp_path: Path) -> Path:
    """An export of a store with one fact in it."""
    source = tmp_path / "source"
    service = open_service(data_dir=source)
    try:
        service.write(WRITER, body(id="m1", content="The customer prefers email."))
    finally:
        service.close()
    dump = tmp_path / "log.jsonl"
    done = run("export", "--output", str(dump), "--data-dir", str(source))
    assert done.returncode == 0, done.stderr
    return dump


def test_a_bad_export_into_a_fresh_data_dir_leaves_no_directory(tmp_path: Path) -> None:
    """An import that fails on a bad line leaves no data directory, store file or
    master.key where there was none."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"record": "nonsense"}\n', encoding="utf-8")
    fresh = tmp_path / "deeper" / "fresh"
    done = run("import", str(bad), "--data-dir", str(fresh))
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1].startswith("gmem: error: line 1 is not a valid export")
    assert not (tmp_path / "deeper").exists()


def test_an_export_under_another_master_key_leaves_an_empty_folder_as_it_was(
    tmp_path: Path,
) -> None:
    """Importing into an existing empty folder without the source's master key fails, and
    the folder is left empty: no new master.key, no store file."""
    dump = exported(tmp_path)
    target = tmp_path / "target"
    target.mkdir()
    done = run("import", str(dump), "--data-dir", str(target))
    assert done.returncode == 1
    assert "master key" in done.stderr
    assert list(target.iterdir()) == []


def test_a_failed_import_into_a_sqlite_url_leaves_no_file_beside_it(tmp_path: Path) -> None:
    """With a sqlite:/// URL, neither the database file nor its journal nor a master.key
    is left in its folder after a failed import."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    folder = tmp_path / "db"
    folder.mkdir()
    url = f"sqlite:///{folder / 'moved.db'}"
    done = run("import", str(bad), "--database-url", url)
    assert done.returncode == 1
    assert list(folder.iterdir()) == []


def test_a_failed_import_into_a_store_with_data_leaves_it_as_it_was(tmp_path: Path) -> None:
    """An import refused because the store has data leaves that store and its master key
    in place."""
    dump = exported(tmp_path)
    source = tmp_path / "source"
    key = (source / "master.key").read_bytes()
    done = run("import", str(dump), "--data-dir", str(source))
    assert done.returncode == 1
    assert "needs an empty store" in done.stderr
    assert (source / "gmem.sqlite3").stat().st_size > 0
    assert (source / "master.key").read_bytes() == key


def test_a_store_moved_from_sqlite_to_postgresql_keeps_keys_and_retries(tmp_path: Path) -> None:
    """gmem export of a SQLite store, gmem import into PostgreSQL: the key made on SQLite
    authenticates against the PostgreSQL server, and a write retried there with its
    Idempotency-Key gets its first answer again (the same 201, no second event)."""
    dsn = postgres_dsn()
    assert dsn is not None
    master = base64.b64encode(secrets.token_bytes(32)).decode("ascii")
    sqlite_env = os.environ | {"GMEM_MASTER_KEY": master}
    source = tmp_path / "source"
    token = create_key(source, env=sqlite_env)
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "move-1"}
    with serving(source, tmp_path / "sqlite.log", env=sqlite_env) as client:
        first = client.post("/v1/memories", json=write_body(), headers=headers)
    assert first.status_code == 201, first.text
    dump = tmp_path / "log.jsonl"
    done = run("export", "--output", str(dump), "--data-dir", str(source), master_key=master)
    assert done.returncode == 0, done.stderr
    with fresh_schema(dsn) as url:
        done = run("import", str(dump), "--database-url", url, master_key=master)
        assert done.returncode == 0, done.stderr
        assert "1 API key(s), 1 idempotency record(s)" in done.stdout
        pg_env = sqlite_env | {"GMEM_DATABASE_URL": url}
        with serving(tmp_path / "pg", tmp_path / "pg.log", env=pg_env) as client:
            again = client.post("/v1/memories", json=write_body(), headers=headers)
            feed = client.get("/v1/events", headers={"Authorization": headers["Authorization"]})
    assert again.status_code == 201, again.text
    assert again.json() == first.json()
    assert feed.status_code == 200, feed.text
    assert len(feed.json()["events"]) == 1
