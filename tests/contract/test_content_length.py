"""What a memory's length still tells once its content is sealed or gone (issue 13, defect
11): neither a blob's size nor a deleted item's token count tells it; the token count of
each write stays in the append-only log, a documented limit (docs/reliability.md)."""

from __future__ import annotations

from governed_memory.core.events import MemoryWritten
from governed_memory.service import MemoryService
from tests.support.fakes import body, principal

WRITER = principal()

#: Contents of very different lengths, each under 256 UTF-8 bytes.
SHORT = "4111 1111 1111 1111"
LONG = "The customer asked us to write down, for the next call, that " + "x" * 150


def test_a_sealed_blob_does_not_tell_how_long_its_content_is(service: MemoryService) -> None:
    """A 19-character card number and a 211-character note seal to blobs of one size, in
    the projection and in the log alike."""
    service.write(WRITER, body(id="short", content=SHORT))
    service.write(WRITER, body(id="long", content=LONG))
    rows = [service.store.get("acme", memory_id) for memory_id in ("short", "long")]
    sizes = {len(row.content) for row in rows if row is not None and row.content is not None}
    assert len(sizes) == 1
    logged = {
        len(stored.event.content)
        for stored in service.store.events_after("acme", 0, 10)
        if isinstance(stored.event, MemoryWritten)
    }
    assert logged == sizes


def test_a_forgotten_memory_keeps_no_token_count(service: MemoryService) -> None:
    """Once deleted, the projection's token count is 0, not the content's length in tokens."""
    service.write(WRITER, body(id="a", content=LONG))
    service.forget_subject(WRITER, "customer-1")
    state = service.store.get("acme", "a")
    assert state is not None
    assert (state.content, state.tokens) == (None, 0)
    assert service.verify_replay().ok


def test_the_log_keeps_each_writes_token_count_a_documented_limit(service: MemoryService) -> None:
    """The immutable ``memory.written`` event keeps the token count it was written with, so
    the log tells a coarse length of content that is gone (docs/reliability.md says why)."""
    service.write(WRITER, body(id="a", content=LONG))
    service.forget_subject(WRITER, "customer-1")
    (written,) = [
        stored.event
        for stored in service.store.events_after("acme", 0, 10)
        if isinstance(stored.event, MemoryWritten)
    ]
    assert written.tokens > 0
