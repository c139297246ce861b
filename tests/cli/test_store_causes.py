"""A store's own failures named by cause: read-only media, and a PostgreSQL URL that is wrong.

Read-only media are real where the tests run as root (a tmpfs mounted, filled, then
remounted read-only); elsewhere the folder and its files lose their write permission,
which SQLite meets the same way (it cannot create its journal beside the database).
"""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_causes import error_line, run, write_one
from tests.conftest import postgres_dsn
from tests.support.processes import free_port


@pytest.fixture
def read_only_store(tmp_path: Path) -> Iterator[Path]:
    """A data directory holding a store with one memory, made read-only afterwards."""
    media = tmp_path / "media"
    media.mkdir()
    mounted = os.geteuid() == 0
    if mounted:  # root ignores permissions: only a read-only file system stops it
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64m", "gmem-test", str(media)], check=True
        )
    data = media / "data"
    try:
        write_one(data)
        assert (
            run(
                "keys",
                "create",
                "--tenant",
                "acme",
                "--principal",
                "ops",
                "--agents",
                "*",
                "--scopes",
                "memory:read",
                "--data-dir",
                str(data),
                cwd=tmp_path,
            ).returncode
            == 0
        )
        if mounted:
            subprocess.run(["mount", "-o", "remount,ro", str(media)], check=True)
        else:
            for path in [data, *data.iterdir()]:
                path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        yield data
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(media)], check=False)
        else:
            data.chmod(0o755)


def test_a_store_on_read_only_media_can_be_exported_verified_and_listed(
    read_only_store: Path, tmp_path: Path
) -> None:
    """export, replay --verify and keys list only read, so they work on read-only media."""
    where = ("--data-dir", str(read_only_store))
    exported = run("export", "--output", "-", *where, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    records = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [r["record"] for r in records].count("event") == 1
    verified = run("replay", "--verify", *where, cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr
    assert "replay clean: 1 event(s), 1 item(s)" in verified.stdout
    listed = run("keys", "list", *where, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 1


def test_a_command_that_writes_names_the_read_only_folder(
    read_only_store: Path, tmp_path: Path
) -> None:
    """A command that must write says the database's folder cannot be written, and which
    commands still work."""
    line = error_line(run("expire", "--data-dir", str(read_only_store), cwd=tmp_path))
    assert line.startswith(
        f"cannot open the SQLite database {read_only_store / 'gmem.sqlite3'}: its folder "
        "cannot be written (read-only media, or no permission)"
    )
    assert "export, replay --verify and keys list only read" in line


def _with(dsn: str, **parts: str) -> str:
    """A URL of the test server with some parts replaced (user, port, host, database)."""
    from psycopg.conninfo import conninfo_to_dict

    given = {k: str(v) for k, v in conninfo_to_dict(dsn).items()} | parts
    user = given.get("user", "postgres")
    host, port = given.get("host", "127.0.0.1"), given.get("port", "5432")
    return f"postgresql://{user}@{host}:{port}/{given.get('dbname', 'postgres')}"


@pytest.mark.parametrize(
    ("parts", "cause"),
    [
        (
            {"dbname": "gmem_no_such_database"},
            "the database 'gmem_no_such_database' does not exist",
        ),
        ({"user": "gmem_no_such_role"}, "the server refused the login: the role does not exist"),
        ({"host": "no-such-host.invalid"}, "the host name no-such-host.invalid does not resolve"),
        ({"port": "refused"}, "connection refused: nothing listens on 127.0.0.1:"),
    ],
    ids=["no-database", "no-role", "no-host", "refused"],
)
def test_a_wrong_postgresql_url_fails_at_once_with_its_cause(
    parts: dict[str, str], cause: str, tmp_path: Path
) -> None:
    """A URL PostgreSQL refuses fails on its first connection with the cause, not after the
    pool's timeout as "PoolTimeout"; never with the driver's own message."""
    dsn = postgres_dsn()
    assert dsn is not None
    if parts.get("port") == "refused":
        parts = {"host": "127.0.0.1", "port": str(free_port())}
    url = _with(dsn, **parts)
    env = {"GMEM_MASTER_KEY": base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()}
    line = error_line(run("migrate", "--database-url", url, cwd=tmp_path, env=env, timeout=60))
    assert line.startswith("cannot connect to PostgreSQL at "), line
    assert cause in line
    assert "PoolTimeout" not in line and "FATAL" not in line
