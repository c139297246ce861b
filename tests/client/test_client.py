"""Every method of ``Client`` against the real app: the library's values, over HTTP."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from governed_memory import (
    AuditEvent,
    Client,
    EraseResult,
    ForgetResult,
    ItemPage,
    Kind,
    MemoryItem,
    Provenance,
    QuarantinePage,
    SearchResult,
    SelfPromotion,
    Status,
    Trust,
    WriteResult,
)
from governed_memory.client import RetryPolicy
from tests.client.conftest import FlakyTransport
from tests.support.api import Served
from tests.support.fakes import fact


def test_write_creates_then_replaces(served: Served, client: Client) -> None:
    """PUT with expected_version 0 creates (created=True); at the current version it replaces."""
    first = client.write("pref-1", **fact())
    assert isinstance(first, WriteResult)
    assert first.created
    assert isinstance(first.item, MemoryItem)
    assert (first.item.id, first.item.version, first.item.status) == ("pref-1", 1, Status.ACTIVE)
    second = client.write(
        "pref-1", **fact(content="Prefers email, never before 9 am."), expected_version=1
    )
    assert not second.created
    assert second.item.version == 2
    assert second.item.content == "Prefers email, never before 9 am."


def test_write_returns_the_same_item_as_the_library(served: Served, client: Client) -> None:
    """The decoded item equals the one MemoryService returns, field for field."""
    written = client.write("pref-1", **fact(kind=Kind.PREFERENCE, trust=Trust.TRUSTED))
    principal = next(iter(served.principals.values()))
    assert written.item == served.service.get(principal, "pref-1")
    assert client.get("pref-1") == written.item


def test_write_accepts_library_values(client: Client) -> None:
    """Provenance, enums and an aware expires_at are sent in their JSON forms."""
    expires = datetime.now(UTC) + timedelta(days=3)
    item = client.write(
        "pref-2",
        **fact(
            provenance=Provenance("crm", "ticket-2", "v3"),
            kind=Kind.WORKING_NOTE,
            expires_at=expires,
        ),
    ).item
    assert item.provenance == Provenance("crm", "ticket-2", "v3")
    assert item.kind is Kind.WORKING_NOTE
    assert abs(item.expires_at - expires) < timedelta(milliseconds=1)


def test_create_lets_the_service_choose_the_id(client: Client) -> None:
    """POST /v1/memories returns a new item with a generated id."""
    result = client.create(**fact(ttl_seconds=3600))
    assert result.created
    assert result.item.id
    assert result.item.version == 1
    assert client.get(result.item.id) == result.item


def test_an_untrusted_write_is_quarantined(client: Client) -> None:
    """trust defaults to untrusted: the item waits in quarantine."""
    item = client.create(**fact(trust=None)).item
    assert (item.status, item.trust) == (Status.QUARANTINED, Trust.UNTRUSTED)


def test_history_lists_every_change_without_content(client: Client) -> None:
    """history returns AuditEvents in order, one per version, for the asked id."""
    client.write("pref-1", **fact())
    client.write("pref-1", **fact(content="Updated."), expected_version=1)
    events = client.history("pref-1")
    assert all(isinstance(event, AuditEvent) for event in events)
    assert [event.version for event in events] == [1, 2]
    assert [event.type for event in events] == ["memory.written", "memory.written"]
    assert {event.memory_id for event in events} == {"pref-1"}
    assert events[0].position < events[1].position


def test_promote_makes_a_quarantined_item_active_and_verified(served: Served) -> None:
    """A reviewer's promote returns the item active and verified."""
    writer = served.client(served.key("memory:write,memory:read", trust="untrusted"))
    reviewer = served.client(served.key("memory:review,memory:read"))
    item = writer.create(**fact(trust="untrusted")).item
    promoted = reviewer.promote(item.id, item.version)
    assert (promoted.status, promoted.trust, promoted.version) == (
        Status.ACTIVE,
        Trust.VERIFIED,
        2,
    )


def test_reject_refuses_a_quarantined_item(served: Served) -> None:
    """A reviewer's reject, with a reason, returns the item rejected."""
    writer = served.client(served.key("memory:write", trust="untrusted"))
    reviewer = served.client(served.key("memory:review"))
    item = writer.create(**fact(trust="untrusted")).item
    rejected = reviewer.reject(item.id, item.version, "contradicts the CRM")
    assert rejected.status is Status.REJECTED


def test_list_quarantine_pages_through_the_queue(served: Served, client: Client) -> None:
    """The queue comes oldest first, in pages joined by next_cursor."""
    ids = [client.create(**fact(trust="untrusted", content=f"Note {n}.")).item.id for n in range(3)]
    first = client.list_quarantine(agent_id="support-bot", purpose="support", limit=2)
    assert isinstance(first, QuarantinePage)
    assert [item.id for item in first.items] == ids[:2]
    assert first.next_cursor is not None
    second = client.list_quarantine(limit=2, cursor=first.next_cursor)
    assert [item.id for item in second.items] == ids[2:]
    assert second.next_cursor is None


def test_search_returns_hits_within_the_budget(client: Client) -> None:
    """search returns scored hits of active items only, and says how the budget was spent."""
    client.write("pref-1", **fact())
    client.write("pref-2", **fact(content="Call only about email outages.", trust="untrusted"))
    result = client.search(
        "support-bot", "support", "email", subject_id="customer-1", kinds=[Kind.FACT], limit=5
    )
    assert isinstance(result, SearchResult)
    assert [hit.item.id for hit in result.items] == ["pref-1"]
    hit = result.items[0]
    assert hit.score > 0
    assert set(hit.score_parts) == {"lexical", "confidence", "recency"}
    assert hit.tokens > 0
    assert result.used_tokens == hit.tokens
    assert result.tokenizer


def test_search_skips_what_does_not_fit_the_budget(client: Client) -> None:
    """A token budget smaller than an item leaves it out and counts it as skipped."""
    client.write("pref-1", **fact(content="email " * 50))
    result = client.search("support-bot", "support", "email", token_budget=5)
    assert result.items == []
    assert result.skipped == 1


def test_forget_subject_deletes_and_is_idempotent(client: Client) -> None:
    """forget_subject deletes the subject's items; a repeat affects nothing."""
    client.write("pref-1", **fact())
    forgotten = client.forget_subject("customer-1")
    assert isinstance(forgotten, ForgetResult)
    assert (forgotten.subject_id, forgotten.affected) == ("customer-1", 1)
    assert forgotten.position is not None
    item = client.get("pref-1")
    assert (item.status, item.content) == (Status.DELETED, None)
    assert client.forget_subject("customer-1").affected == 0


def test_erase_deletes_one_memory_and_answers_alike_when_retried(served: Served) -> None:
    """erase returns the EraseResult of the memory.erased event; erasing again returns it
    again; the writer itself is refused (SelfPromotion), and the history says who erased."""
    writer = served.client(served.key())
    dpo = served.client(served.key("subject:forget,memory:read"))
    writer.write("pref-1", **fact())
    with pytest.raises(SelfPromotion):
        writer.erase("pref-1")
    erased = dpo.erase("pref-1", idempotency_key="erase-pref-1")
    assert isinstance(erased, EraseResult)
    assert (erased.id, erased.position) == ("pref-1", writer.events()[-1].position)
    assert dpo.erase("pref-1") == erased
    assert (dpo.get("pref-1").status, dpo.get("pref-1").content) == (Status.DELETED, None)
    assert [e.type for e in writer.history("pref-1")] == ["memory.written", "memory.erased"]


def test_list_pages_through_memories_with_filters(served: Served, client: Client) -> None:
    """list returns ItemPages in (updated_at, id) order, filtered by status and kind given
    as library values or strings, joined by next_cursor."""
    client.write("pref-1", **fact())
    client.write("pref-2", **fact(kind=Kind.PREFERENCE))
    client.write("pref-3", **fact(trust="untrusted"))
    first = client.list(limit=2)
    assert isinstance(first, ItemPage)
    assert [item.id for item in first.items] == ["pref-1", "pref-2"]
    rest = client.list(limit=2, cursor=first.next_cursor)
    assert ([item.id for item in rest.items], rest.next_cursor) == (["pref-3"], None)
    assert [i.id for i in client.list(status=Status.QUARANTINED).items] == ["pref-3"]
    assert [i.id for i in client.list(kind="preference", agent_id="support-bot").items] == [
        "pref-2"
    ]
    assert client.list(subject_id="customer-9", purpose="support").items == []


def test_history_gives_a_rejection_its_reason(served: Served) -> None:
    """The memory.rejected entry of a history reads back with the reviewer's reason, for a
    key that may read the memory's content."""
    writer = served.client(served.key("memory:write,audit:read", trust="untrusted"))
    reviewer = served.client(served.key("memory:review,audit:read"))
    item = writer.create(**fact(trust="untrusted")).item
    reviewer.reject(item.id, item.version, "contradicts the CRM")
    assert writer.history(item.id)[-1].reason is None  # unreviewed: for reviewers only
    rejected = reviewer.history(item.id)[-1]
    assert (rejected.type, rejected.reason) == ("memory.rejected", "contradicts the CRM")


def test_events_reads_the_feed_after_a_position(client: Client) -> None:
    """events returns the tenant's feed in order; after the last position, nothing."""
    client.write("pref-1", **fact())
    client.write("pref-2", **fact())
    events = client.events()
    assert [event.memory_id for event in events] == ["pref-1", "pref-2"]
    assert all(event.event_id for event in events)
    assert client.events(after=events[0].position) == events[1:]
    assert client.events(after=events[-1].position, limit=10) == []


def test_health_endpoints_answer_without_a_key(served: Served) -> None:
    """live, ready and health are true for a running service, with no API key at all."""
    anonymous = served.client()
    assert anonymous.live()
    assert anonymous.ready()
    assert anonymous.health()


def test_an_idempotency_key_given_twice_returns_the_first_result(client: Client) -> None:
    """The same key for the same write returns the first item, never a second one."""
    first = client.create(**fact(), idempotency_key="order-42")
    again = client.create(**fact(), idempotency_key="order-42")
    assert again.item == first.item
    assert len(client.events()) == 1


def test_mutating_calls_send_a_fresh_idempotency_key(served: Served) -> None:
    """Each mutating call carries its own generated Idempotency-Key."""
    transport = FlakyTransport()
    client = served.client(served.key(), transport=transport)
    client.create(**fact())
    client.create(**fact())
    client.get(client.events()[0].memory_id or "")
    keys = [request.headers.get("Idempotency-Key") for request in transport.sent]
    assert keys[0] and keys[1] and keys[0] != keys[1]
    assert keys[2:] == [None, None]


def test_the_client_reads_gmem_url_and_gmem_api_key(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without arguments the client uses GMEM_URL and GMEM_API_KEY."""
    monkeypatch.setenv("GMEM_URL", served.url + "/")
    monkeypatch.setenv("GMEM_API_KEY", served.key())
    with Client() as client:
        assert client.base_url == served.url
        assert client.create(**fact()).created


def test_write_fields_are_checked_like_keyword_arguments() -> None:
    """A missing or unknown write field is a TypeError before anything is sent."""
    with Client("http://127.0.0.1:9", "key", retry=RetryPolicy(attempts=1)) as client:
        fields = fact()
        del fields["provenance"]
        with pytest.raises(TypeError, match="missing required keyword arguments: 'provenance'"):
            client.create(**fields)
        with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
            client.write("pref-1", **fact(colour="blue"))
