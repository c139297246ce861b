"""The projection is a deterministic fold of the log (SPEC §4)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_memory.codec import (
    CodecError,
    event_from_row,
    event_row,
    stored_from_json,
    stored_to_json,
)
from governed_memory.core import lifecycle
from governed_memory.core.commands import PromoteMemory, WriteMemory
from governed_memory.core.events import (
    Event,
    MemoryContentDestroyed,
    MemoryErased,
    MemoryPromoted,
    StoredEvent,
)
from governed_memory.core.lifecycle import Context, SealedContent
from governed_memory.core.projection import ProjectionError, apply, diff, replay
from governed_memory.core.values import Status
from tests.support.fakes import START, body, principal

SEALED = SealedContent(b"\x01sealed", "hash", 3)


def log_of(plan: list[tuple[str, int, bool]]) -> list[Event]:
    """Build a valid log from a plan of (id, rewrites, promote?) steps."""
    counter = itertools.count()
    events: list[Event] = []
    for step, (memory_id, rewrites, promote) in enumerate(plan):
        now = START + timedelta(seconds=step)
        ctx = Context(now, principal(), lambda: f"e{next(counter)}")
        current = replay(events).get(("acme", memory_id))
        if current is not None and current.status is not Status.QUARANTINED:
            continue  # only quarantined items take further untrusted rewrites
        version = 0 if current is None else current.version
        for _ in range(rewrites + 1):
            command = WriteMemory.parse(
                body(id=memory_id, trust="untrusted", expected_version=version)
            )
            events += lifecycle.decide_write(ctx, command, memory_id, SEALED, current, None)
            current = replay(events)[("acme", memory_id)]
            version = current.version
        if promote:
            review = Context(now, principal(name="rev"), lambda: f"e{next(counter)}")
            events += lifecycle.decide_promote(
                review, PromoteMemory(memory_id, version), current, None
            )
    return events


plans = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 2), st.booleans()), max_size=8
)


@given(plans)
@settings(max_examples=60, deadline=None)
def test_replaying_the_same_log_twice_gives_the_same_projection(
    plan: list[tuple[str, int, bool]],
) -> None:
    """No clock, no randomness: the fold is a pure function of the events."""
    events = log_of(plan)
    assert replay(events) == replay(list(events))
    assert list(diff(replay(events), replay(events))) == []


@given(plans)
@settings(max_examples=60, deadline=None)
def test_versions_count_the_changes_of_each_item(plan: list[tuple[str, int, bool]]) -> None:
    """An item's version is the number of events that changed it."""
    events = log_of(plan)
    for (_, memory_id), item in replay(events).items():
        assert item.version == sum(1 for e in events if e.memory_id == memory_id)


def test_an_event_for_the_wrong_version_cannot_be_applied() -> None:
    """A gap or a repeat in an item's versions is an error, never silently folded."""
    events = log_of([("a", 0, False)])
    item = replay(events)[("acme", "a")]
    stale = MemoryPromoted("x", "acme", "a", 5, START, "rev", None)
    with pytest.raises(ProjectionError):
        apply(item, stale)
    with pytest.raises(ProjectionError):
        apply(None, stale)


def test_diff_names_the_fields_that_differ() -> None:
    """Replay verification reports precisely what is wrong."""
    projection = replay(log_of([("a", 0, False)]))
    key = ("acme", "a")
    tampered = {key: dataclasses.replace(projection[key], confidence=0.01, status=Status.ACTIVE)}
    [difference] = diff(projection, tampered)
    assert "confidence" in difference
    assert "status" in difference
    assert list(diff(projection, {})) == [
        "acme/a: produced by the log but missing from the projection"
    ]


def test_erasing_deletes_and_destroying_content_keeps_the_status() -> None:
    """memory.erased leaves the item deleted; memory.content_destroyed leaves it in its
    status; both leave no content and no token count, and count as a change."""
    events = log_of([("a", 0, False)])
    item = replay(events)[("acme", "a")]
    later = START + timedelta(days=1)
    erased = apply(item, MemoryErased("x", "acme", "a", 2, later, "dpo", None))
    destroyed = apply(item, MemoryContentDestroyed("y", "acme", "a", 2, later, "sys", None))
    assert (erased.status, destroyed.status) == (Status.DELETED, Status.QUARANTINED)
    for changed in (erased, destroyed):
        assert (changed.content, changed.tokens, changed.version) == (None, 0, 2)
        assert changed.updated_at == later
        assert changed.content_hash == item.content_hash  # unlinkable once its key is gone


@pytest.mark.parametrize(
    "event",
    [
        MemoryErased("e1", "acme", "a", 2, START, "dpo", "erase-key"),
        MemoryContentDestroyed("e2", "acme", "a", 3, START, "system:retention", None),
    ],
    ids=["erased", "content-destroyed"],
)
def test_the_new_events_read_back_from_their_stored_and_exported_forms(event: Event) -> None:
    """Every backend and the export store them through the codec: the same event back,
    with a payload that holds no content (only the cause, for retention)."""
    row = event_row(event)
    assert event_from_row(row) == event
    assert stored_from_json(stored_to_json(StoredEvent(7, event))) == StoredEvent(7, event)
    assert json.loads(row.payload) in ({}, {"cause": "retention"})


def test_an_unknown_cause_of_destroyed_content_is_refused() -> None:
    """The cause is a closed vocabulary, never free text."""
    row = event_row(MemoryContentDestroyed("e2", "acme", "a", 3, START, "sys", None))
    with pytest.raises(CodecError):
        event_from_row(dataclasses.replace(row, payload='{"cause": "because I said so"}'))
