"""The master key file survives a crash while it is being created (SPEC §7, §12)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from governed_memory import crypto
from governed_memory.crypto import MASTER_KEY_FILE, load_or_create_key_file


class Crash(BaseException):
    """Stands for the process dying at this point (nothing after it runs)."""


def test_a_crash_while_creating_the_key_file_never_leaves_a_partial_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dying before the key is written leaves no key file, so the next start makes one."""

    def dies(_: int) -> bytes:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(crypto.secrets, "token_bytes", dies)
        with pytest.raises(Crash):
            load_or_create_key_file(tmp_path)
    assert not (tmp_path / MASTER_KEY_FILE).exists()
    key = load_or_create_key_file(tmp_path)
    assert len(key) == 32
    assert load_or_create_key_file(tmp_path) == key


def test_a_crash_before_the_key_reaches_the_disk_leaves_no_key_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dying at the fsync (a power loss would lose the data) leaves no visible key file."""

    def dies(_: int) -> None:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(crypto.os, "fsync", dies)
        with pytest.raises(Crash):
            load_or_create_key_file(tmp_path)
    assert not (tmp_path / MASTER_KEY_FILE).exists()
    assert len(load_or_create_key_file(tmp_path)) == 32


def test_processes_racing_to_create_the_key_file_all_get_the_one_key(tmp_path: Path) -> None:
    """Concurrent first opens (say gmem keys create and gmem serve) agree on one complete key."""
    for attempt in range(20):
        directory = tmp_path / str(attempt)
        barrier = threading.Barrier(8)
        keys: list[bytes] = []
        errors: list[BaseException] = []

        def first_open(
            directory: Path = directory,
            barrier: threading.Barrier = barrier,
            keys: list[bytes] = keys,
            errors: list[BaseException] = errors,
        ) -> None:
            barrier.wait()
            try:
                keys.append(load_or_create_key_file(directory))
            except BaseException as error:  # noqa: BLE001 - collected for the assertion
                errors.append(error)

        threads = [threading.Thread(target=first_open) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert len(set(keys)) == 1
        assert stat.S_IMODE(os.stat(directory / MASTER_KEY_FILE).st_mode) == 0o600
        assert [p.name for p in directory.iterdir()] == [MASTER_KEY_FILE]
