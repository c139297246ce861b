"""Errors that name their cause, seen as an operator sees them: ``gmem`` run as a process.

Each test runs the installed ``gmem`` (with this checkout's code through PYTHONPATH) in a
scratch folder and reads what it prints: the one ``gmem: error:`` line, the warnings, the
start-up log line of ``gmem serve``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from governed_memory import Principal, Scope, Trust, open_service
from governed_memory._version import __version__
from tests.support.processes import GMEM, free_port, serving


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``gmem *args`` in ``cwd`` with a clean GMEM_* environment plus ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("GMEM_")}
    return subprocess.run(
        [GMEM, *args],
        cwd=cwd,
        env=clean | (env or {}),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a failed run (asserting there is exactly one)."""
    assert done.returncode == 1, done
    lines = [line for line in done.stderr.splitlines() if line.startswith("gmem: error: ")]
    assert len(lines) == 1, done.stderr
    return lines[0].removeprefix("gmem: error: ")


def write_one(data_dir: Path | None = None, database_url: str | None = None) -> None:
    """One trusted memory through the library, so the store holds a subject key."""
    operator = Principal("acme", "operator", frozenset(Scope), Trust.TRUSTED)
    where = {"database_url": database_url} if database_url else {"data_dir": data_dir}
    service = open_service(synchronous="NORMAL", **where)  # type: ignore[arg-type]
    try:
        service.write(
            operator,
            {
                "agent_id": "support-bot",
                "subject_id": "customer-1",
                "purpose": "support",
                "kind": "fact",
                "content": "Lives in Utrecht.",
                "provenance": {"source": "crm", "ref": "r-1"},
                "trust": "trusted",
                "expected_version": 0,
                "id": "city",
            },
        )
    finally:
        service.close()


def test_gmem_version_prints_the_version(tmp_path: Path) -> None:
    """``gmem --version`` prints ``gmem <version>`` and exits 0."""
    done = run("--version", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, f"gmem {__version__}\n")


def test_a_relative_sqlite_url_is_refused_with_its_absolute_form(tmp_path: Path) -> None:
    """``sqlite:///data/x.db`` is relative: refused, with the four-slash absolute form to
    write instead, and no folder is created."""
    done = run("migrate", "--database-url", "sqlite:///data/x.db", cwd=tmp_path)
    line = error_line(done)
    assert line.startswith("GMEM_DATABASE_URL: the path of a sqlite:/// URL must be absolute")
    assert f"sqlite:///{tmp_path}/data/x.db (four slashes)" in line
    assert not (tmp_path / "data").exists()


def test_a_sqlite_file_in_a_missing_folder_is_refused_without_making_folders(
    tmp_path: Path,
) -> None:
    """An absolute ``sqlite:///`` path whose folder is missing fails, naming the folder,
    instead of creating a tree of folders in silence."""
    done = run("migrate", "--database-url", f"sqlite:///{tmp_path}/typo/x.db", cwd=tmp_path)
    assert f"the folder {tmp_path}/typo of the SQLite file does not exist" in error_line(done)
    assert not (tmp_path / "typo").exists()


def test_a_new_data_directory_is_announced(tmp_path: Path) -> None:
    """The data directory of a new store is created with a note saying so."""
    done = run("migrate", "--data-dir", "fresh", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    note = f"gmem: note: created the data directory {tmp_path / 'fresh'} for a new store"
    assert note in done.stderr.splitlines()


def test_the_key_file_of_a_sqlite_url_store_lives_beside_the_database(tmp_path: Path) -> None:
    """A ``sqlite:///`` store keeps ``master.key`` beside its database file, whatever folder
    a command runs in; no ``./gmem-data`` appears in that folder."""
    store, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    store.mkdir()
    elsewhere.mkdir()
    url = f"sqlite:///{store}/memory.db"
    assert run("expire", "--database-url", url, cwd=elsewhere).returncode == 0
    assert (store / "master.key").is_file()
    assert not (elsewhere / "gmem-data").exists()
    write_one(database_url=url)  # the library finds the same key beside the database
    assert run("replay", "--verify", "--database-url", url, cwd=tmp_path).returncode == 0


def test_a_missing_key_file_names_its_folder_and_the_remedy(tmp_path: Path) -> None:
    """Without ``master.key`` a store with subject keys refuses to open, naming the folder
    where the file belongs and what to do."""
    store = tmp_path / "store"
    store.mkdir()
    url = f"sqlite:///{store}/memory.db"
    write_one(database_url=url)
    (store / "master.key").unlink()
    line = error_line(run("replay", "--verify", "--database-url", url, cwd=tmp_path))
    assert line.startswith(f"master.key is missing from {store}, the folder of the database")
    assert "put the store's master.key back there, or set GMEM_MASTER_KEY" in line


def test_a_garbage_key_file_is_named_as_the_malformed_file(tmp_path: Path) -> None:
    """A key file that is not base64 of 32 bytes is reported as that file, by path (not as
    GMEM_MASTER_KEY), and its bytes are not shown."""
    (tmp_path / "master.key").write_bytes(b"not a key \xff\xfe secret-looking-bytes")
    line = error_line(run("expire", "--data-dir", str(tmp_path), cwd=tmp_path))
    assert line.startswith(f"the key file {tmp_path / 'master.key'} is malformed")
    assert "GMEM_MASTER_KEY is not valid base64" not in line
    assert "secret-looking" not in line


def test_a_file_that_is_not_a_database_is_named_with_the_reason(tmp_path: Path) -> None:
    """A ``gmem.sqlite3`` that is not SQLite fails with its path and "not a database"."""
    (tmp_path / "gmem.sqlite3").write_bytes(b"these bytes are not a database " * 100)
    line = error_line(run("migrate", "--data-dir", str(tmp_path), cwd=tmp_path))
    assert line == f"cannot open the SQLite database {tmp_path / 'gmem.sqlite3'}: not a database"


def test_a_port_in_use_is_one_line_before_anything_is_opened(tmp_path: Path) -> None:
    """A port another process listens on: exit 1 and one line naming the address; no
    uvicorn log record, and the store is not even created."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("serve", "--port", str(port), "--data-dir", "data", cwd=tmp_path)
    assert done.stderr == (
        f"gmem: error: 127.0.0.1:{port} is already in use (another server?): "
        "choose another --port (GMEM_PORT)\n"
    )
    assert done.returncode == 1
    assert not (tmp_path / "data").exists()


def test_a_host_that_does_not_resolve_is_named(tmp_path: Path) -> None:
    """``--host`` naming no known host is one line naming it."""
    done = run("serve", "--host", "no-such-host.invalid", "--data-dir", "d", cwd=tmp_path)
    assert error_line(done) == (
        "cannot listen on no-such-host.invalid:8080: the host name does not resolve "
        "(--host, GMEM_HOST)"
    )


def test_serve_logs_one_start_up_line_naming_version_store_and_address(tmp_path: Path) -> None:
    """``gmem serve`` logs one line with the version, the store's kind and location, and
    the URL it serves."""
    port = free_port()
    log = tmp_path / "serve.log"
    with serving(tmp_path / "data", log, port=port):
        pass
    records = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    starts = [r for r in records if r["message"].startswith("gmem ")]
    assert len(starts) == 1
    database = tmp_path / "data" / "gmem.sqlite3"
    assert starts[0]["message"] == (
        f"gmem {__version__} serving the sqlite store {database} at http://127.0.0.1:{port}"
    )
    assert (starts[0]["version"], starts[0]["store"], starts[0]["location"]) == (
        __version__,
        "sqlite",
        str(database),
    )


def test_an_unknown_gmem_variable_is_named_with_the_closest_setting(tmp_path: Path) -> None:
    """``GMEM_PROT`` (a typo) is warned about, with the setting it probably means; the
    command still runs."""
    done = run("migrate", "--data-dir", ".", cwd=tmp_path, env={"GMEM_PROT": "9000"})
    assert done.returncode == 0, done.stderr
    assert (
        "gmem: warning: GMEM_PROT is not a setting and is ignored (did you mean GMEM_PORT?)"
        in done.stderr.splitlines()
    )


def test_a_junk_line_of_the_settings_file_is_named_by_file_and_line_only(tmp_path: Path) -> None:
    """A line of the settings file that is not KEY=value is warned about by file and line
    number, without its text (it may be a secret); unknown names in it are named too."""
    config = tmp_path / "gmem.env"
    config.write_text(
        "# settings\nGMEM_RATE_LIMIT_REQUESTS=5\n\nhunter2 is the db password\n"
        "GMEM_MAX_BODY_BYTE=10\nPORT=9000\n"
    )
    done = run("migrate", "--data-dir", ".", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warnings == [
        f"gmem: warning: {config}, line 4 is not a KEY=value line and is ignored (not shown)",
        f"gmem: warning: {config}, line 5: GMEM_MAX_BODY_BYTE is not a setting and is "
        "ignored (did you mean GMEM_MAX_BODY_BYTES?)",
        f"gmem: warning: {config}, line 6: PORT is not a GMEM_* setting and is ignored",
    ]
    assert "hunter2" not in done.stderr


def test_demo_leaves_a_configured_store_alone(tmp_path: Path) -> None:
    """``gmem demo`` runs on a throwaway store even where GMEM_DATA_DIR names one, and its
    help says so."""
    configured = tmp_path / "production-data"
    done = run("demo", cwd=tmp_path, env={"GMEM_DATA_DIR": str(configured)})
    assert done.returncode == 0, done.stderr
    assert not configured.exists()
    helped = run("demo", "--help", cwd=tmp_path).stdout
    assert "(default: a throwaway store)" in " ".join(helped.split())
    assert "gmem-data" not in helped


@pytest.mark.parametrize("setting", ["database-pool-max"])
def test_the_pool_size_has_a_flag(tmp_path: Path, setting: str) -> None:
    """``--database-pool-max`` mirrors GMEM_DATABASE_POOL_MAX on every store command."""
    done = run("migrate", f"--{setting}", "0", "--data-dir", ".", cwd=tmp_path)
    assert error_line(done).startswith("GMEM_DATABASE_POOL_MAX: ")
