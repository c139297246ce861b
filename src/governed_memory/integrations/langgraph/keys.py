"""Which memory a LangGraph key stands for now, found by id alone (no scan, no index).

A key's memories are its generations ``lg-<digest>-0``, ``-1``, …, created in order, each
with expected version 0, so two processes racing to create the same generation meet as a
version conflict. A new generation is made only when the one before cannot be rewritten
under the rules: a correction an untrusted writer proposes for an active memory, or a
re-creation after the key's memory was erased, rejected or expired. Rewrites keep the id.

What a reader sees is the key's *visible* memory: the newest generation if it is active,
else the active memory a pending or rejected correction names (``supersedes_id``), else
nothing — a quarantined write is not read back until a reviewer promotes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from governed_memory.core.model import MemoryItem
from governed_memory.core.values import Status
from governed_memory.integrations.langgraph.backends import Backend
from governed_memory.integrations.langgraph.mapping import KeyIds


@dataclass(frozen=True, slots=True)
class KeyState:
    """A key's newest generation (``number`` −1 when it has none) and its visible memory."""

    ids: KeyIds
    number: int
    latest: MemoryItem | None
    visible: MemoryItem | None

    @property
    def next_id(self) -> str:
        """The id of the generation a new memory of this key gets."""
        return self.ids.id(self.number + 1)

    def generations(self) -> list[str]:
        """The ids of every generation the key has had, newest first."""
        return [self.ids.id(number) for number in range(self.number, -1, -1)]


def resolve(backend: Backend, ids: KeyIds) -> KeyState:
    """The state of one key: O(log n) reads for n generations (a new key costs one)."""
    seen: dict[int, MemoryItem | None] = {}

    def probe(number: int) -> MemoryItem | None:
        if number not in seen:
            seen[number] = backend.get(ids.id(number))
        return seen[number]

    if probe(0) is None:
        return KeyState(ids, -1, None, None)
    low, high = 0, 1
    while probe(high) is not None:  # gallop: the generations exist up to some n
        low, high = high, high * 2
    while high - low > 1:  # then bisect between the last found and the first missing
        middle = (low + high) // 2
        low, high = (middle, high) if probe(middle) is not None else (low, middle)
    latest = seen[low]
    assert latest is not None
    return KeyState(ids, low, latest, _visible(backend, latest))


def _visible(backend: Backend, latest: MemoryItem) -> MemoryItem | None:
    if latest.status is Status.ACTIVE:
        return latest
    if latest.status in (Status.QUARANTINED, Status.REJECTED) and latest.supersedes_id:
        target = backend.get(latest.supersedes_id)
        if target is not None and target.status is Status.ACTIVE:
            return target
    return None
