"""Verifying the event log's hash chain: ``gmem audit verify`` and ``gmem audit head``.

Each tenant's events are read in position order as stored (columns and hashes, see
:class:`~governed_memory.records.ChainLink`) and the chain is computed again from the
columns alone (:mod:`governed_memory.chain`). The first event of a tenant that breaks it
is named with what is wrong; the rest of that tenant is not judged, since one break makes
every later hash disagree. Nothing here needs the master key, and no content is read:
the payload is hashed as the ciphertext it stores.

What a chain alone cannot show: a tenant's last events deleted, or its whole log rewritten
with hashes computed again (they are not secret). Record the heads elsewhere (``gmem audit
head``) and give them back to ``verify``: a recorded head that is gone or differs is a
break too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from governed_memory.chain import GENESIS, next_hash
from governed_memory.ports import EventLog
from governed_memory.records import ChainLink

PAGE = 5_000

UNCHAINED = "it has no chain hash: the row was written outside the store"
MISPLACED = (
    "it does not follow the tenant's previous event: an event before it was deleted, "
    "inserted or moved"
)
EDITED = "its hash does not match its stored columns: the event was edited"
REWRITTEN = "its hash is not the one recorded for it: the log was rewritten from here or before"
TRUNCATED = (
    "the head recorded at this position is gone: the tenant's events from here on were deleted"
)
#: A head recorded earlier: its position and hash.
Recorded = tuple[int, bytes]


@dataclass(frozen=True, slots=True)
class ChainBreak:
    """The first event of a tenant that breaks its chain, and what is wrong with it."""

    tenant_id: str
    position: int
    problem: str

    def __str__(self) -> str:
        return f"tenant {self.tenant_id}, position {self.position}: {self.problem}"


@dataclass(frozen=True, slots=True)
class ChainHead:
    """A tenant's last event and its hash: what an operator records to compare later."""

    tenant_id: str
    position: int
    hash: str  # hex
    events: int


@dataclass(frozen=True, slots=True)
class ChainReport:
    """What verifying the chain found: how much it read, and each tenant's first break."""

    events: int = 0
    tenants: int = 0
    breaks: list[ChainBreak] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.breaks


def links_of(log: EventLog, tenant_id: str) -> Iterator[ChainLink]:
    """The tenant's stored events with their hashes, in position order, page by page."""
    after = 0
    while True:
        page = log.chain_links(tenant_id, after, PAGE)
        yield from page
        if len(page) < PAGE:
            return
        after = page[-1].position


def problem_of(link: ChainLink, previous: bytes) -> str | None:
    """What is wrong with ``link`` if the tenant's previous event hashed to ``previous``."""
    if link.prev_hash is None or link.hash is None:
        return UNCHAINED
    if link.prev_hash != previous:
        return MISPLACED
    try:
        computed = next_hash(previous, link.columns)
    except TypeError:  # a column of a type the store never writes
        return EDITED
    return None if computed == link.hash else EDITED


def verify_tenant(
    log: EventLog, tenant_id: str, recorded: Recorded | None = None
) -> tuple[int, ChainBreak | None]:
    """How many events the tenant has, and the first that breaks its chain, if any;
    ``recorded``: a head recorded earlier, which must still be in the chain."""
    previous, count, found, seen = GENESIS, 0, None, False
    for link in links_of(log, tenant_id):
        count += 1
        if found is not None:
            continue  # counted, not judged: every later hash disagrees after a break
        problem = problem_of(link, previous)
        if problem is None and recorded is not None and link.position == recorded[0]:
            seen = True
            problem = None if link.hash == recorded[1] else REWRITTEN
        if problem is not None:
            found = ChainBreak(tenant_id, link.position, problem)
        else:
            previous = link.hash or GENESIS
    if found is None and recorded is not None and not seen:
        found = ChainBreak(tenant_id, recorded[0], TRUNCATED)
    return count, found


def verify_chain(log: EventLog, recorded: Mapping[str, Recorded] | None = None) -> ChainReport:
    """Verify every tenant's chain, and that each head ``recorded`` (tenant → position
    and hash, from an earlier ``gmem audit head``) is still in it; each broken tenant's
    first bad event."""
    recorded = recorded or {}
    events, tenants, breaks = 0, 0, []
    for tenant in sorted(set(log.tenants()) | set(recorded)):
        count, found = verify_tenant(log, tenant, recorded.get(tenant))
        events, tenants = events + count, tenants + (count > 0)
        if found is not None:
            breaks.append(found)
    return ChainReport(events, tenants, breaks)


def chain_heads(log: EventLog) -> list[ChainHead]:
    """Each tenant's last event and its hash as stored (not verified: see verify)."""
    heads = []
    for tenant in log.tenants():
        last, count = None, 0
        for link in links_of(log, tenant):
            last, count = link, count + 1
        if last is not None:
            stored = last.hash.hex() if last.hash is not None else "-"
            heads.append(ChainHead(tenant, last.position, stored, count))
    return heads


__all__ = [
    "ChainBreak",
    "ChainHead",
    "ChainReport",
    "Recorded",
    "chain_heads",
    "links_of",
    "problem_of",
    "verify_chain",
    "verify_tenant",
]
