"""What a reader is shown of an item: the one place that decides whether content is shown.

A read that hands items to a caller by id or in a listing (``get``, browse, the review
queue, a rejection's reason in history) builds them with :func:`shown`, so that the rule
of :func:`governed_memory.core.access.may_read_content` holds on every such path: content
nobody has vouched for reaches reviewers only.
"""

from __future__ import annotations

from datetime import datetime

from governed_memory.core.access import may_read_content
from governed_memory.core.model import ItemState, MemoryItem, Principal
from governed_memory.service.vault import KeyCache, Vault


def shown(
    principal: Principal,
    state: ItemState,
    vault: Vault,
    keys: KeyCache | None = None,
    now: datetime | None = None,
) -> MemoryItem:
    """The item as ``principal`` may read it, with its status as of ``now`` if given;
    withheld content is never even decrypted."""
    content = vault.decrypt(state, keys) if may_read_content(principal, state) else None
    return MemoryItem.from_state(state, content, now)


__all__ = ["shown"]
