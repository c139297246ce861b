"""The log's positions as every store pages through them and imports them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from governed_memory.core.events import StoredEvent

EVENT_PAGE = 5_000


def paged_events(
    events_after: Callable[[str | None, int, int], list[StoredEvent]], tenant_id: str
) -> Iterator[StoredEvent]:
    """Every event of a tenant in position order, read page by page."""
    after = 0
    while True:
        page = events_after(tenant_id, after, EVENT_PAGE)
        yield from page
        if len(page) < EVENT_PAGE:
            return
        after = page[-1].position


def require_ascending(events: Sequence[StoredEvent], head: int) -> None:
    """Refuse (``ValueError``) an import whose positions do not rise above the log's head."""
    for stored in events:
        if stored.position <= head:
            raise ValueError(f"event position {stored.position} is not above the log head {head}")
        head = stored.position


__all__ = ["EVENT_PAGE", "paged_events", "require_ascending"]
