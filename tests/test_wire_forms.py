"""One wire vocabulary: every JSON form reads back into the value that wrote it, every
problem the server answers reads back into the error that caused it."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, get_args

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_memory import errors
from governed_memory.client._calls import Call
from governed_memory.client._problems import BY_TYPE, error_from
from governed_memory.core.events import MemoryWritten, StoredEvent
from governed_memory.core.model import MemoryItem
from governed_memory.core.values import (
    ID_PATTERN,
    NAME_PATTERN,
    SLUG_PATTERN,
    Kind,
    KindName,
    Provenance,
    Status,
    StatusName,
    Trust,
    TrustName,
)
from governed_memory.http.problems import PROBLEMS, error_response
from governed_memory.results import (
    AuditEvent,
    EraseResult,
    ForgetResult,
    QuarantinePage,
    SearchHit,
    SearchResult,
)

ids = st.from_regex(ID_PATTERN, fullmatch=True)
names = st.from_regex(NAME_PATTERN, fullmatch=True)
slugs = st.from_regex(SLUG_PATTERN, fullmatch=True)
# rfc3339 writes four-digit years; the service's clock never leaves them.
instants = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 1, 1)).map(
    lambda naive: naive.replace(tzinfo=UTC)
)
counts = st.integers(min_value=0, max_value=2**53 - 1)
numbers = st.floats(allow_nan=False, allow_infinity=False)
optional_text = st.none() | st.text(max_size=20)

provenances = st.builds(
    Provenance, source=st.text(min_size=1), ref=st.text(min_size=1), version=optional_text
)
items = st.builds(
    MemoryItem,
    id=ids,
    tenant_id=slugs,
    agent_id=names,
    subject_id=names,
    purpose=slugs,
    kind=st.sampled_from(Kind),
    content=st.none() | st.text(),
    content_hash=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
    provenance=provenances,
    trust=st.sampled_from(Trust),
    confidence=st.floats(min_value=0, max_value=1),
    created_at=instants,
    updated_at=instants,
    expires_at=instants,
    version=counts,
    status=st.sampled_from(Status),
    supersedes_id=st.none() | ids,
    superseded_by=st.none() | ids,
)
hits = st.builds(
    SearchHit,
    item=items,
    score=numbers,
    score_parts=st.dictionaries(st.sampled_from(["bm25", "confidence", "recency"]), numbers),
    tokens=counts,
)
audit_events = st.builds(
    AuditEvent,
    position=counts,
    event_id=st.uuids().map(str),
    type=st.sampled_from(["memory.written", "memory.promoted", "subject.forgotten"]),
    memory_id=st.none() | ids,
    version=st.none() | counts,
    occurred_at=instants,
    actor=names,
    subject_id=st.none() | names,
)


def over_the_wire(form: dict[str, Any]) -> Any:
    """The form as the other side reads it: through JSON text."""
    return json.loads(json.dumps(form))


@given(items)
def test_an_item_reads_back_from_its_json_form(item: MemoryItem) -> None:
    """MemoryItem.from_dict(to_dict(item)) == item, through JSON."""
    assert MemoryItem.from_dict(over_the_wire(item.to_dict())) == item


@given(
    st.builds(
        SearchResult,
        items=st.lists(hits, max_size=3),
        used_tokens=counts,
        skipped=counts,
        tokenizer=st.sampled_from(["cl100k_base", "estimate"]),
    )
)
def test_a_search_result_reads_back_from_its_json_form(result: SearchResult) -> None:
    """SearchResult (and each SearchHit in it) reads back from its JSON form."""
    assert SearchResult.from_dict(over_the_wire(result.to_dict())) == result


@given(hits)
def test_a_search_hit_reads_back_from_its_json_form(hit: SearchHit) -> None:
    """A hit is an item's form plus its score, the parts of the score and its tokens."""
    assert SearchHit.from_dict(over_the_wire(hit.to_dict())) == hit


@given(audit_events)
def test_an_audit_event_reads_back_from_its_feed_form(event: AuditEvent) -> None:
    """An entry of the audit feed reads back into the same event."""
    assert AuditEvent.from_dict(over_the_wire(event.to_dict())) == event


@given(audit_events, ids)
def test_an_audit_event_reads_back_from_its_history_form(event: AuditEvent, asked: str) -> None:
    """A history entry names neither the event nor the subject: it reads back for the
    memory asked about, with an empty event id."""
    read = AuditEvent.from_history_dict(over_the_wire(event.to_history_dict()), asked)
    assert read == replace(event, event_id="", memory_id=asked, subject_id=None)


rejections = st.builds(
    AuditEvent,
    position=counts,
    event_id=st.uuids().map(str),
    type=st.just("memory.rejected"),
    memory_id=ids,
    version=counts,
    occurred_at=instants,
    actor=names,
    reason=st.none() | st.text(),
)


@given(rejections, ids)
def test_a_rejection_keeps_its_reason_in_history_and_drops_it_in_the_feed(
    event: AuditEvent, asked: str
) -> None:
    """The history form of a rejection reads back with its reason; the feed form, which
    never carries content, reads back without it."""
    read = AuditEvent.from_history_dict(over_the_wire(event.to_history_dict()), asked)
    assert read == replace(event, event_id="", memory_id=asked)
    assert AuditEvent.from_dict(over_the_wire(event.to_dict())) == replace(event, reason=None)


@given(st.builds(EraseResult, id=ids, position=st.none() | counts))
def test_an_erase_result_reads_back_from_its_json_form(result: EraseResult) -> None:
    """EraseResult.from_dict(to_dict(result)) == result, through JSON."""
    assert EraseResult.from_dict(over_the_wire(result.to_dict())) == result


@given(st.builds(ForgetResult, subject_id=names, affected=counts, position=st.none() | counts))
def test_a_forget_result_reads_back_from_its_json_form(result: ForgetResult) -> None:
    """ForgetResult.from_dict(to_dict(result)) == result, through JSON."""
    assert ForgetResult.from_dict(over_the_wire(result.to_dict())) == result


@given(
    st.builds(
        QuarantinePage,
        items=st.lists(items, max_size=3),
        next_cursor=st.none() | st.text(min_size=1),
    )
)
def test_a_quarantine_page_reads_back_from_its_json_form(page: QuarantinePage) -> None:
    """QuarantinePage.from_dict(to_dict(page)) == page, through JSON."""
    assert QuarantinePage.from_dict(over_the_wire(page.to_dict())) == page


@pytest.mark.parametrize(
    ("names", "enum"), [(KindName, Kind), (TrustName, Trust), (StatusName, Status)]
)
def test_the_schema_names_are_the_enum_values(names: Any, enum: type[StrEnum]) -> None:
    """The Literal types the HTTP and MCP schemas use list exactly their enum's values."""
    assert list(get_args(names)) == [member.value for member in enum]


def example(cls: type[errors.GovernedMemoryError]) -> errors.GovernedMemoryError:
    """An instance of ``cls`` with every extension member set."""
    if cls is errors.VersionConflict:
        return errors.VersionConflict("m-1", 2, 3)
    if cls is errors.InvalidTransition:
        return errors.InvalidTransition("m-1 is not quarantined", current_version=4)
    if cls is errors.RateLimited:
        return errors.RateLimited("slow down", retry_after=7)
    if cls is errors.ValidationError:
        return errors.ValidationError.field("purpose", "must match")
    return cls(f"a {cls.__name__}")


#: What the client raises for an edge-only problem: what a library caller already handles.
RAISED_AS = {
    errors.MalformedRequest: errors.ValidationError,
    errors.MethodNotAllowed: errors.GovernedMemoryError,
}


@pytest.mark.parametrize("cls", list(PROBLEMS), ids=lambda cls: cls.__name__)
def test_every_problem_reads_back_into_its_error(cls: type[errors.GovernedMemoryError]) -> None:
    """The server's problem for each class of the table raises that class in the client,
    with its detail and its extension members."""
    sent = example(cls)
    answer = error_response(sent)
    response = httpx.Response(answer.status_code, headers=answer.headers, content=answer.body)
    raised = error_from(response, Call("PUT", "/v1/memories/m-1", lambda r: None, memory_id="m-1"))
    assert type(raised) is RAISED_AS.get(cls, cls)
    if cls is not errors.GovernedMemoryError:  # the bare 500 says nothing of its cause
        assert raised.detail == sent.detail
    if cls in RAISED_AS:
        return
    for member in ("current_version", "expected_version", "retry_after", "errors"):
        assert getattr(raised, member, None) == getattr(sent, member, None), member


def test_the_client_knows_every_slug_of_the_tree_and_nothing_else() -> None:
    """BY_TYPE is read off the error tree: one entry per slug of the classes that may
    leave the process."""
    leaving = [
        cls
        for cls in vars(errors).values()
        if isinstance(cls, type)
        and issubclass(cls, errors.GovernedMemoryError)
        and not issubclass(cls, errors.StoreSignal)
    ]
    assert set(BY_TYPE) == {cls.slug for cls in leaving}


@given(
    st.text(min_size=1),
    st.text(min_size=1),
    st.none() | st.text(min_size=1),
)
def test_an_items_stored_provenance_is_the_compact_json_of_its_fields(
    source: str, ref: str, version: str | None
) -> None:
    """The provenance column an item's row stores is exactly the compact, key-sorted JSON
    of its fields, whatever they hold (quotes, controls, non-ASCII): a rebuild compares
    stored rows with the rows it makes, and a different spelling would rewrite them."""
    from governed_memory.codec import _compact_json, _provenance_json

    provenance = Provenance(source=source, ref=ref, version=version)
    expected = json.dumps(provenance.as_dict(), separators=(",", ":"), sort_keys=True)
    assert _provenance_json(provenance) == expected == _compact_json(provenance.as_dict())


written_events = st.builds(
    MemoryWritten,
    event_id=ids,
    tenant_id=slugs,
    memory_id=ids,
    version=st.integers(min_value=1, max_value=2**31),
    occurred_at=instants,
    actor=names,
    idempotency_key=optional_text,
    agent_id=st.text(),
    subject_id=st.text(),
    purpose=st.text(),
    kind=st.sampled_from(Kind),
    content=st.none() | st.binary(max_size=600),
    content_hash=st.text() | st.from_regex(r"[0-9a-f]{64}", fullmatch=True),
    provenance=provenances,
    trust=st.sampled_from(Trust),
    confidence=st.floats(min_value=0, max_value=1) | st.sampled_from([0.0, 1.0, 1e-300, 0.1]),
    expires_at=instants,
    supersedes_id=st.none() | st.text(),
    status=st.sampled_from(Status),
    tokens=st.integers(min_value=0, max_value=2**63),
)


@given(written_events)
def test_a_written_events_stored_payloads_are_the_compact_json_of_its_values(
    event: MemoryWritten,
) -> None:
    """A ``memory.written``'s stored payload texts are exactly the compact, key-sorted
    JSON of :func:`payload_of` (what the chain digests) and of the compact log's list of
    values, whatever the fields hold: a different spelling would break the chain of an
    export or make a rebuild rewrite every row."""
    from governed_memory.codec import (
        _COMPACT_KEYS,
        event_columns,
        payload_of,
        stored_columns,
    )

    payload = payload_of(event)
    canonical = json.dumps(payload, separators=(",", ":"), sort_keys=True)
    values = [payload[key] for key in _COMPACT_KEYS]
    compact = json.dumps(values, separators=(",", ":"), sort_keys=True)
    columns, stored = stored_columns(event)
    assert columns == event_columns(event)
    assert columns[-1] == canonical
    assert stored[len(columns) - 1] == compact
    assert stored[len(columns)] == event.content


@given(written_events.filter(lambda event: event.content is not None))
def test_a_written_event_decodes_from_its_stored_row_as_it_was(event: MemoryWritten) -> None:
    """Whatever its fields hold, a ``memory.written`` (which always has content) reads back
    from the row a store keeps of it, compact (its content in a column of its own) or
    canonical: the compact row is unpacked by position, so a column out of place would
    decode another event."""
    from governed_memory.codec import stored_columns, stored_event_from_row

    columns, stored = stored_columns(event)

    assert stored_event_from_row((7, *stored)) == StoredEvent(7, event)
    assert stored_event_from_row((7, *columns, None, None)) == StoredEvent(7, event)


def test_decoded_events_share_the_values_a_log_repeats() -> None:
    """``memory.written`` events of one tenant, actor, agent, subject, purpose and
    provenance decode into the same objects for those values, from compact and canonical
    rows alike: a rebuild's fold keeps one state per item, each holding them, and copies
    read from each row cost about 0.4 KiB an item of its peak."""
    from governed_memory.codec import stored_columns, stored_event_from_row

    def fresh(value: Any) -> Any:  # a copy, as each row read from a store holds its own
        return "".join(list(value)) if isinstance(value, str) else value

    def decoded(event: MemoryWritten, compact: bool) -> MemoryWritten:
        columns, stored = stored_columns(event)
        row = stored if compact else (*columns, None, None)
        decoded = stored_event_from_row((1, *map(fresh, row))).event
        assert isinstance(decoded, MemoryWritten)
        assert decoded == event
        return decoded

    first = MemoryWritten(
        event_id="e1",
        tenant_id="acme",
        memory_id="m1",
        version=1,
        occurred_at=datetime(2026, 1, 2, tzinfo=UTC),
        actor="writer",
        idempotency_key=None,
        agent_id="support-bot",
        subject_id="customer-1",
        purpose="support",
        kind=Kind.FACT,
        content=b"sealed",
        content_hash="0" * 64,
        provenance=Provenance(source="crm", ref="ticket-1"),
        trust=Trust.TRUSTED,
        confidence=0.9,
        expires_at=datetime(2027, 1, 2, tzinfo=UTC),
        supersedes_id=None,
        status=Status.ACTIVE,
        tokens=3,
    )
    second = replace(first, event_id="e2", memory_id="m2", content=b"sealed too")
    for compact in (True, False):
        one, two = decoded(first, compact), decoded(second, compact)
        for name in ("tenant_id", "actor", "agent_id", "subject_id", "purpose", "provenance"):
            assert getattr(one, name) is getattr(two, name), name


#: Payload texts a compact row can hold only once edited, from the text it was written with.
EDITED_PAYLOADS = {
    "whitespace before": lambda text: " " + text,
    "whitespace after": lambda text: text + "\n",
    "a second value after it": lambda text: text + "[]",
    "its last value dropped": lambda text: json.dumps(json.loads(text)[:-1]),
    "an object of its values": lambda text: json.dumps(dict(enumerate(json.loads(text)))),
    "not JSON": lambda text: text[:-1],
    "bytes": lambda text: text.encode(),
}


@pytest.mark.parametrize("edit", EDITED_PAYLOADS.values(), ids=EDITED_PAYLOADS.keys())
@given(written_events.filter(lambda event: event.content is not None))
def test_a_compact_payload_other_than_one_list_of_its_values_is_malformed(
    edit: Any, event: MemoryWritten
) -> None:
    """A compact row's payload is read as the compact encoder wrote it: one JSON list of
    the event's values and nothing around it. Anything else, which only an edited row
    holds, is refused as malformed rather than read."""
    from governed_memory.codec import CodecError, stored_columns, stored_event_from_row

    columns, stored = stored_columns(event)
    at = len(columns) - 1
    edited = (*stored[:at], edit(stored[at]), *stored[at + 1 :])

    with pytest.raises(CodecError):
        stored_event_from_row((7, *edited))
