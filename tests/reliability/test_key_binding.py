"""A store is bound to the master key it was created with (issue 13, defect 12).

At its first start a store records the master key's check value (a keyed hash of a fixed
label, never the key); every later start compares it and refuses another key with one
line naming the store, on SQLite and on PostgreSQL, before anything is read or written.
A store from before the check value is bound at its next start, if its keys unwrap.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from governed_memory.bootstrap import open_service
from governed_memory.crypto import MASTER_KEY_CHECK, Keyring, parse_master_key
from governed_memory.errors import ValidationError
from governed_memory.service import MemoryService
from tests.conftest import postgres_dsn
from tests.support.fakes import body, principal
from tests.support.postgres import fresh_schema
from tests.support.processes import GMEM, free_port

WRITER = principal()
ANOTHER_KEY = "was created with another master key"


def new_key() -> str:
    return base64.b64encode(secrets.token_bytes(32)).decode("ascii")


@pytest.fixture
def database_url() -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL schema."""
    with fresh_schema(postgres_dsn() or "") as url:
        yield url


def forget_binding(data_dir: Path) -> None:
    """Make the (closed) SQLite store look as one from before the check value existed."""
    with contextlib.closing(sqlite3.connect(data_dir / "gmem.sqlite3")) as conn, conn:
        conn.execute("DELETE FROM store_meta WHERE name = ?", (MASTER_KEY_CHECK,))


def check_value_of(data_dir: Path) -> str | None:
    with contextlib.closing(sqlite3.connect(data_dir / "gmem.sqlite3")) as conn:
        row = conn.execute(
            "SELECT value FROM store_meta WHERE name = ?", (MASTER_KEY_CHECK,)
        ).fetchone()
    return None if row is None else str(row[0])


def test_a_second_instance_with_another_master_key_on_one_postgres_schema_refuses_to_start(
    database_url: str,
) -> None:
    """Two instances of one empty PostgreSQL database, two master keys: the first binds
    the store, the second refuses at start naming the cause, and the first keeps
    serving its writes."""
    first_key = new_key()
    first = open_service(database_url=database_url, master_key=first_key)
    try:
        with pytest.raises(ValidationError, match=ANOTHER_KEY) as refused:
            open_service(database_url=database_url, master_key=new_key())
        assert "postgresql" in refused.value.detail
        first.write(WRITER, body(id="m1", content="Prefers email."))
        again = open_service(database_url=database_url, master_key=first_key)
        assert again.get(WRITER, "m1").content == "Prefers email."
        again.close()
    finally:
        first.close()


def test_instances_racing_to_start_an_empty_postgres_schema_with_two_keys_one_wins(
    database_url: str,
) -> None:
    """Both start at once on the empty database: the first claim wins, the other start
    is refused (never both bound, never both running)."""
    outcomes: list[MemoryService | Exception] = []
    barrier = threading.Barrier(2)

    def start(key: str) -> None:
        barrier.wait()
        try:
            outcomes.append(open_service(database_url=database_url, master_key=key))
        except ValidationError as error:
            outcomes.append(error)

    threads = [threading.Thread(target=start, args=(new_key(),)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    started = [o for o in outcomes if isinstance(o, MemoryService)]
    refused = [o for o in outcomes if isinstance(o, ValidationError)]
    for service in started:
        service.close()
    assert len(started) == 1
    assert len(refused) == 1
    assert ANOTHER_KEY in refused[0].detail


def test_gmem_serve_with_another_master_key_on_one_postgres_schema_exits_with_one_line(
    database_url: str, tmp_path: Path
) -> None:
    """The operator's view: ``gmem serve`` of the second key ends at once, status 1, one
    line ``gmem: error: …`` naming the cause; nothing is served."""
    env = os.environ | {"GMEM_DATABASE_URL": database_url, "GMEM_MASTER_KEY": new_key()}
    subprocess.run([GMEM, "migrate", "--data-dir", str(tmp_path)], env=env, check=True, timeout=60)
    open_service(database_url=database_url, master_key=env["GMEM_MASTER_KEY"]).close()
    env["GMEM_MASTER_KEY"] = new_key()
    done = subprocess.run(
        [GMEM, "serve", "--data-dir", str(tmp_path), "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("gmem: error: this store (postgresql ")
    assert ANOTHER_KEY in lines[0]
    assert env["GMEM_MASTER_KEY"] not in done.stderr


def test_a_new_sqlite_store_with_a_swapped_master_key_file_refuses_to_start(
    tmp_path: Path,
) -> None:
    """Even a store with nothing written yet is bound at its first start: a swapped
    ``master.key`` is refused, not silently adopted beside the other key's records."""
    data_dir = tmp_path / "data"
    open_service(data_dir=data_dir).close()
    (data_dir / "master.key").write_text(new_key() + "\n", encoding="ascii")
    with pytest.raises(ValidationError, match=ANOTHER_KEY) as refused:
        open_service(data_dir=data_dir)
    assert str(data_dir / "gmem.sqlite3") in refused.value.detail


def test_a_store_from_before_the_check_value_is_bound_at_its_next_start(
    tmp_path: Path,
) -> None:
    """A store without a recorded check value whose keys unwrap under the master key
    records that key's value at its next start; another key is then refused."""
    data_dir = tmp_path / "data"
    service = open_service(data_dir=data_dir)
    service.write(WRITER, body(id="m1"))
    service.close()
    forget_binding(data_dir)
    assert check_value_of(data_dir) is None

    service = open_service(data_dir=data_dir)
    key = (data_dir / "master.key").read_text(encoding="ascii")
    assert service.store.meta(MASTER_KEY_CHECK) == Keyring(parse_master_key(key)).check_value()
    service.close()
    with pytest.raises(ValidationError, match=ANOTHER_KEY):
        open_service(data_dir=data_dir, master_key=new_key())


def test_a_store_from_before_is_not_bound_to_a_key_its_subject_keys_refuse(
    tmp_path: Path,
) -> None:
    """The first start after the upgrade with a wrong key is refused and binds nothing:
    the right key still starts the store afterwards."""
    data_dir = tmp_path / "data"
    service = open_service(data_dir=data_dir)
    service.write(WRITER, body(id="m1"))
    service.close()
    forget_binding(data_dir)
    with pytest.raises(ValidationError, match=ANOTHER_KEY):
        open_service(data_dir=data_dir, master_key=new_key())
    assert check_value_of(data_dir) is None
    open_service(data_dir=data_dir).close()
    assert check_value_of(data_dir) is not None


def test_an_import_into_a_new_store_binds_it_to_the_importing_master_key(
    tmp_path: Path,
) -> None:
    """``gmem import`` opens the new store with the master key of the export, which
    binds it: a start with another key is refused afterwards."""
    key = new_key()
    source = open_service(data_dir=tmp_path / "source", master_key=key)
    source.write(WRITER, body(id="m1", content="Prefers email."))
    lines = [json.dumps(record) for record in source.maintenance.export()]
    source.close()
    target = open_service(data_dir=tmp_path / "target", master_key=key)
    target.maintenance.import_log(lines)
    target.close()
    with pytest.raises(ValidationError, match=ANOTHER_KEY):
        open_service(data_dir=tmp_path / "target", master_key=new_key())
    again = open_service(data_dir=tmp_path / "target", master_key=key)
    assert again.get(WRITER, "m1").content == "Prefers email."
    again.close()


def test_a_bound_store_whose_subject_key_does_not_unwrap_refuses_to_start(
    tmp_path: Path,
) -> None:
    """The right master key, but a subject key row altered (or copied from another
    store): the start is refused, naming that, not another master key."""
    data_dir = tmp_path / "data"
    service = open_service(data_dir=data_dir)
    service.write(WRITER, body(id="m1"))
    service.close()
    with contextlib.closing(sqlite3.connect(data_dir / "gmem.sqlite3")) as conn, conn:
        conn.execute("UPDATE subject_keys SET wrapped = randomblob(length(wrapped))")
    with pytest.raises(ValidationError, match="its keys were altered") as refused:
        open_service(data_dir=data_dir)
    assert ANOTHER_KEY not in refused.value.detail
