"""Reading a tenant's whole log page by page (shared by the stores)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

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


__all__ = ["EVENT_PAGE", "paged_events"]
