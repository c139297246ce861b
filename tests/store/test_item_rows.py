"""An item's row (codec.item_row / item_from_row): what a store writes reads back the same,
and a row holding a value no item can have is refused, never read as something else."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_memory.codec import ITEM_COLUMNS, item_from_row, item_row
from governed_memory.core.model import ItemState
from governed_memory.core.values import Kind, Provenance, Status, Trust

instants = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 1, 1)).map(
    lambda instant: instant.replace(tzinfo=UTC)
)
texts = st.text(min_size=1, max_size=12)
states = st.builds(
    ItemState,
    tenant_id=texts,
    id=texts,
    agent_id=texts,
    subject_id=texts,
    purpose=texts,
    kind=st.sampled_from(Kind),
    content=st.none() | st.binary(max_size=64),
    content_version=st.integers(min_value=1, max_value=2**31),
    content_hash=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
    provenance=st.builds(Provenance, source=texts, ref=texts, version=st.none() | texts),
    trust=st.sampled_from(Trust),
    confidence=st.floats(min_value=0, max_value=1),
    created_at=instants,
    updated_at=instants,
    expires_at=instants,
    version=st.integers(min_value=1, max_value=2**31),
    status=st.sampled_from(Status),
    supersedes_id=st.none() | texts,
    superseded_by=st.none() | texts,
    written_by=texts,
    tokens=st.integers(min_value=0, max_value=2**31),
)


@given(states)
def test_an_item_reads_back_from_its_row(state: ItemState) -> None:
    assert item_from_row(item_row(state)) == state


@given(states, states)
def test_two_items_of_one_provenance_text_read_back_each_their_own(
    first: ItemState, second: ItemState
) -> None:
    """Rows decoded one after the other (a search's candidates) keep their own values,
    whatever is shared between reads."""
    second = replace(second, provenance=first.provenance)
    assert [item_from_row(item_row(s)) for s in (first, second, first)] == [
        first,
        second,
        first,
    ]


@pytest.mark.parametrize(
    ("column", "value"),
    [("kind", "gossip"), ("trust", "absolute"), ("status", "undead"), ("kind", None)],
)
def test_a_row_with_a_value_no_item_can_have_is_refused(column: str, value: object) -> None:
    state = ItemState(
        tenant_id="t",
        id="m",
        agent_id="a",
        subject_id="s",
        purpose="p",
        kind=Kind.FACT,
        content=b"sealed",
        content_version=1,
        content_hash="0" * 64,
        provenance=Provenance("test", "1"),
        trust=Trust.TRUSTED,
        confidence=0.5,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        updated_at=datetime(2026, 1, 1, tzinfo=UTC),
        expires_at=datetime(2027, 1, 1, tzinfo=UTC),
        version=1,
        status=Status.ACTIVE,
        supersedes_id=None,
        superseded_by=None,
        written_by="writer",
        tokens=3,
    )
    row = list(item_row(state))
    row[ITEM_COLUMNS.index(column)] = value
    with pytest.raises(ValueError, match="is not a valid"):
        item_from_row(tuple(row))
