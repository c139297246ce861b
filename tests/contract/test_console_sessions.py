"""The review console's sessions as every backend keeps them: by digest, touched only
forward, ended one by one or all the idle ones at once."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from governed_memory.ports import Store
from governed_memory.records import ConsoleSession
from tests.support.fakes import START


def _session(digest: str, key_id: str = "k1", minutes: int = 0) -> ConsoleSession:
    at = START + timedelta(minutes=minutes)
    return ConsoleSession(digest, key_id, "check-" + key_id, at, at)


def test_a_stored_session_reads_back_as_it_was_stored(store: Store) -> None:
    session = _session("d" * 64)
    store.add_console_session(session)
    assert store.console_session("d" * 64) == session
    assert store.console_session("e" * 64) is None


def test_touching_a_session_only_moves_its_last_use_forward(store: Store) -> None:
    store.add_console_session(_session("a" * 64))
    store.touch_console_session("a" * 64, START + timedelta(minutes=5))
    store.touch_console_session("a" * 64, START + timedelta(minutes=2))
    store.touch_console_session("b" * 64, START + timedelta(minutes=9))  # unknown: nothing
    stored = store.console_session("a" * 64)
    assert stored == dataclasses.replace(_session("a" * 64), last_seen=START + timedelta(minutes=5))
    assert store.console_session("b" * 64) is None


def test_ending_a_session_deletes_it_and_no_other(store: Store) -> None:
    store.add_console_session(_session("a" * 64))
    store.add_console_session(_session("b" * 64))
    store.end_console_session("a" * 64)
    store.end_console_session("a" * 64)  # twice: nothing more to do
    assert store.console_session("a" * 64) is None
    assert store.console_session("b" * 64) == _session("b" * 64)


def test_ending_the_idle_sessions_deletes_those_last_seen_before_the_cutoff(
    store: Store,
) -> None:
    for minutes, digest in ((0, "a"), (10, "b"), (20, "c")):
        store.add_console_session(_session(digest * 64, minutes=minutes))
    store.touch_console_session("a" * 64, START + timedelta(minutes=30))
    assert store.end_idle_console_sessions(START + timedelta(minutes=15)) == 1
    assert store.console_session("b" * 64) is None
    assert store.console_session("a" * 64) is not None
    assert store.console_session("c" * 64) is not None
    assert store.end_idle_console_sessions(START + timedelta(minutes=15)) == 0
