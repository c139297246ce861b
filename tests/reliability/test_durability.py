"""A forget is erasure even across a crash and a full disk (issue 13, defects 1, 2 and 8).

The real ``gmem serve`` over SQLite. A forget's destroyed key must leave the WAL: the
purge is recorded with the forget and done before anything else when the store opens.
A full disk is a real size limit: ``RLIMIT_FSIZE`` set on the running server with
``prlimit`` (Python ignores ``SIGXFSZ``, so a write past the limit fails with ``EFBIG``,
which SQLite reports as an I/O error), raised again when "space returns".
"""

from __future__ import annotations

import resource
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.reliability.servers import ServerProcess, create_key
from tests.support.fakes import write_body

CANARY = "durablecanary" + secrets.token_hex(8)
FILE = "gmem.sqlite3"


def _put(client: httpx.Client, key: str, memory_id: str, subject: str, content: str) -> int:
    body = write_body(subject_id=subject, content=content)
    headers = {"Authorization": f"Bearer {key}"}
    return client.put(f"/v1/memories/{memory_id}", json=body, headers=headers).status_code


def _forget(client: httpx.Client, key: str, subject: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return client.post(f"/v1/subjects/{subject}/forget", json={}, headers=headers)


def _subject_key(data: Path, subject: str) -> bytes:
    """The subject's wrapped key as the database holds it now."""
    uri = f"{(data / FILE).resolve().as_uri()}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        row = conn.execute("SELECT wrapped FROM subject_keys WHERE subject_id = ?", (subject,))
        (wrapped,) = row.fetchone()
        return bytes(wrapped)


def _holding(data: Path, wrapped: bytes) -> list[str]:
    """The files of the data directory that hold ``wrapped``, read right now."""
    return sorted(p.name for p in data.iterdir() if p.is_file() and wrapped in p.read_bytes())


def _limit_file_size(server: ServerProcess, size: int | None) -> None:
    """The server's RLIMIT_FSIZE: no file grows past ``size`` bytes (None: no limit)."""
    assert server.process is not None
    soft = resource.RLIM_INFINITY if size is None else size
    resource.prlimit(server.process.pid, resource.RLIMIT_FSIZE, (soft, resource.RLIM_INFINITY))


@contextmanager
def _reading(data: Path) -> Iterator[None]:
    """A read transaction on the file, as a running ``gmem export`` holds (read-only, like
    the export: it cannot checkpoint the WAL itself when it closes)."""
    uri = f"{(data / FILE).resolve().as_uri()}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM events").fetchall()
        yield
        conn.execute("COMMIT")


def _serve(data: Path, log: Path) -> ServerProcess:
    server = ServerProcess(data, log)
    server.start()
    server.wait_ready()
    return server


def test_a_forget_under_a_reader_then_a_crash_leaves_no_key_after_restart(
    tmp_path: Path,
) -> None:
    """A reader pins the WAL during a forget, the server is killed with SIGKILL, the reader
    ends: the restarted server purges the WAL before serving, and no file holds the
    subject's wrapped key."""
    data, log = tmp_path / "data", tmp_path / "server.log"
    key = create_key(data)
    server = _serve(data, log)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            assert _put(client, key, "m1", "victim", f"The code is {CANARY}.") == 201
            assert _put(client, key, "k1", "bystander", "The bystander stays.") == 201
            wrapped = _subject_key(data, "victim")
            with _reading(data):
                assert _forget(client, key, "victim").status_code == 200
                assert _holding(data, wrapped) == [f"{FILE}-wal"]  # the purge waits
            server.kill()
    finally:
        server.kill()
    server = _serve(data, log)
    try:
        assert _holding(data, wrapped) == []
    finally:
        server.stop()


def _filled(data: Path, log: Path, key: str) -> int:
    """A store of about a megabyte, checkpointed by a graceful stop: the file's size."""
    with ServerProcess(data, log) as server, httpx.Client(base_url=server.url) as client:
        for number in range(60):
            content = f"Filler {number} " + "lorem ipsum dolor " * 400
            assert _put(client, key, f"f{number}", "filler", content) == 201
    assert not (data / f"{FILE}-wal").exists()
    return (data / FILE).stat().st_size


def _forget_on_a_full_disk(tmp_path: Path) -> tuple[ServerProcess, Path, str, bytes, Any]:
    """A server whose files may not grow past the database's size, the victim's memories
    written (in the WAL) and then forgotten: the WAL cannot be copied into the file."""
    data, log = tmp_path / "data", tmp_path / "server.log"
    key = create_key(data)
    size = _filled(data, log, key)
    server = _serve(data, log)
    _limit_file_size(server, size)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for number in range(4):  # new pages: the database grows past the limit
            content = f"Victim {number} {CANARY} " + "sit amet " * 800
            assert _put(client, key, f"v{number}", "victim", content) == 201
        wrapped = _subject_key(data, "victim")
        answer = _forget(client, key, "victim")
    return server, data, key, wrapped, answer


def test_a_forget_whose_checkpoint_meets_a_full_disk_succeeds_and_purges_when_space_returns(
    tmp_path: Path,
) -> None:
    """The forget committed, so it answers 200 though the WAL cannot be copied; the key
    waits in the WAL, and once space returns the purge is retried and done within
    seconds, with no further request."""
    server, data, _, wrapped, answer = _forget_on_a_full_disk(tmp_path)
    try:
        assert answer.status_code == 200, answer.text
        assert answer.json()["affected"] == 4
        assert _holding(data, wrapped) == [f"{FILE}-wal"]
        _limit_file_size(server, None)
        deadline = time.monotonic() + 30
        while _holding(data, wrapped) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _holding(data, wrapped) == []
    finally:
        server.kill()


def test_a_purge_a_full_disk_left_due_is_done_at_the_next_start(tmp_path: Path) -> None:
    """The forget answered 200 on a full disk, the server is killed with SIGKILL before
    any retry: the next start purges the WAL before serving."""
    server, data, _, wrapped, answer = _forget_on_a_full_disk(tmp_path)
    server.kill()
    assert answer.status_code == 200, answer.text
    assert _holding(data, wrapped) == [f"{FILE}-wal"]
    server = _serve(data, tmp_path / "server.log")
    try:
        assert _holding(data, wrapped) == []
    finally:
        server.stop()


def test_the_first_write_of_a_new_subject_on_a_full_disk_is_503(tmp_path: Path) -> None:
    """A write that cannot commit for lack of space is 503 (the store is unavailable),
    whether its subject is new (its key is stored first) or known; and 201 once space
    returns."""
    data, log = tmp_path / "data", tmp_path / "server.log"
    key = create_key(data)
    server = _serve(data, log)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            assert _put(client, key, "k1", "known", "A known subject.") == 201
            wal = data / f"{FILE}-wal"
            _limit_file_size(server, max(wal.stat().st_size, 1))  # the WAL cannot grow
            new = write_body(subject_id="newcomer", content=f"New {CANARY}.")
            headers = {"Authorization": f"Bearer {key}"}
            refused = client.put("/v1/memories/n1", json=new, headers=headers)
            assert refused.status_code == 503, refused.text
            assert refused.headers["content-type"] == "application/problem+json"
            assert CANARY not in refused.text
            assert _put(client, key, "k2", "known", "Another one.") == 503
            _limit_file_size(server, None)
            assert client.put("/v1/memories/n1", json=new, headers=headers).status_code == 201
    finally:
        server.stop()
