"""What the service returns: plain frozen values with their JSON forms, both ways.

Every adapter (HTTP, CLI, MCP) writes these through ``to_dict``; the client reads the same
shapes back with ``from_dict`` into the same types, and a round-trip property test
(``tests/test_wire_forms.py``) holds the two together. ``from_dict`` reads the service's
own answers: it checks shapes, not rules, and raises ``KeyError``, ``TypeError`` or
``ValueError`` when the data is not the form it expects.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from governed_memory.core.events import MemoryRejected
from governed_memory.core.frozen import quick_init
from governed_memory.core.model import ItemState, MemoryItem
from governed_memory.core.values import (
    from_micros,
    from_rfc3339,
    memory_id,
    rfc3339,
    to_micros,
)
from governed_memory.errors import ValidationError

REJECTED = MemoryRejected.type


@dataclass(frozen=True, slots=True)
class WriteResult:
    """The item a write produced, and whether it created the item.

    It has no JSON form of its own: over HTTP the body is the item's and ``created`` is
    the status (201 rather than 200).
    """

    item: MemoryItem
    created: bool


@dataclass(frozen=True, slots=True)
class ForgetResult:
    """How many items a forget deleted, and the position of its event (None if none)."""

    subject_id: str
    affected: int
    position: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "subject_id": self.subject_id,
            "affected": self.affected,
            "position": self.position,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ForgetResult:
        """The result :meth:`to_dict` wrote."""
        position = data["position"]
        return cls(
            str(data["subject_id"]),
            int(data["affected"]),
            None if position is None else int(position),
        )


@dataclass(frozen=True, slots=True)
class EraseResult:
    """The erased item's id and the position of the ``memory.erased`` event (of the event
    that deleted it, when it was deleted already)."""

    id: str
    position: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "position": self.position}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EraseResult:
        """The result :meth:`to_dict` wrote."""
        position = data["position"]
        return cls(str(data["id"]), None if position is None else int(position))


@quick_init
@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result: the item, its score and the parts of the score, its tokens."""

    item: MemoryItem
    score: float
    score_parts: Mapping[str, float]
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        return self.item.to_dict() | {
            "score": self.score,
            "score_parts": dict(self.score_parts),
            "tokens": self.tokens,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchHit:
        """The hit :meth:`to_dict` wrote: the item's members and the score's."""
        parts = data["score_parts"]
        return cls(
            MemoryItem.from_dict(data),
            float(data["score"]),
            {str(name): float(part) for name, part in parts.items()},
            int(data["tokens"]),
        )


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What fitted the budget, in rank order, and how the budget was spent."""

    items: list[SearchHit]
    used_tokens: int
    skipped: int
    tokenizer: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": [hit.to_dict() for hit in self.items],
            "used_tokens": self.used_tokens,
            "skipped": self.skipped,
            "tokenizer": self.tokenizer,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchResult:
        """The result :meth:`to_dict` wrote."""
        return cls(
            [SearchHit.from_dict(hit) for hit in data["items"]],
            int(data["used_tokens"]),
            int(data["skipped"]),
            str(data["tokenizer"]),
        )


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """A content-free view of one event, for history and the audit feed."""

    position: int
    event_id: str
    type: str
    memory_id: str | None
    version: int | None
    occurred_at: datetime
    actor: str
    subject_id: str | None = None
    # The reason of a memory.rejected event, in a memory's history only (it is content:
    # the audit feed never carries it); None without one, or once the content is destroyed.
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "position": self.position,
            "event_id": self.event_id,
            "type": self.type,
            "memory_id": self.memory_id,
            "version": self.version,
            "occurred_at": rfc3339(self.occurred_at),
            "actor": self.actor,
        }
        if self.subject_id is not None:
            body["subject_id"] = self.subject_id
        return body

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AuditEvent:
        """The event :meth:`to_dict` wrote (an entry of the audit feed)."""
        memory, version = data["memory_id"], data["version"]
        subject = data.get("subject_id")
        return cls(
            position=int(data["position"]),
            event_id=str(data["event_id"]),
            type=str(data["type"]),
            memory_id=None if memory is None else str(memory),
            version=None if version is None else int(version),
            occurred_at=from_rfc3339(data["occurred_at"]),
            actor=str(data["actor"]),
            subject_id=None if subject is None else str(subject),
        )

    def to_history_dict(self) -> dict[str, Any]:
        """The shorter form of a memory's history (the HTTP API's): the memory is the one
        asked about, and the entry names no event id; a rejection also gives its reason."""
        entry: dict[str, Any] = {
            "position": self.position,
            "type": self.type,
            "version": self.version,
            "occurred_at": rfc3339(self.occurred_at),
            "actor": self.actor,
        }
        if self.type == REJECTED:
            entry["reason"] = self.reason
        return entry

    @classmethod
    def from_history_dict(cls, data: Mapping[str, Any], memory_id: str) -> AuditEvent:
        """The event :meth:`to_history_dict` wrote for ``memory_id``; its event id is empty."""
        version, reason = data["version"], data.get("reason")
        return cls(
            position=int(data["position"]),
            event_id="",
            type=str(data["type"]),
            memory_id=memory_id,
            version=None if version is None else int(version),
            occurred_at=from_rfc3339(data["occurred_at"]),
            actor=str(data["actor"]),
            reason=None if reason is None else str(reason),
        )


@dataclass(frozen=True, slots=True)
class ItemPage:
    """One page of items (the review queue, a browse) and the cursor of the next page."""

    items: list[MemoryItem]
    next_cursor: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"items": [item.to_dict() for item in self.items], "next_cursor": self.next_cursor}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ItemPage:
        """The page :meth:`to_dict` wrote."""
        cursor = data["next_cursor"]
        return cls(
            [MemoryItem.from_dict(item) for item in data["items"]],
            None if cursor is None else str(cursor),
        )


#: The review queue's page: an :class:`ItemPage` of quarantined items.
QuarantinePage = ItemPage


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """The outcome of rebuilding the projection from the log and comparing it."""

    events: int
    items: int
    differences: list[str]
    index_differences: int = 0  # how many of them are the search index's (gmem reindex)

    @property
    def ok(self) -> bool:
        return not self.differences


def encode_cursor(item: ItemState) -> str:
    raw = json.dumps([to_micros(item.updated_at), item.id]).encode("ascii")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        micros, last_id = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        if not isinstance(micros, int) or not isinstance(last_id, str):
            raise ValueError
        from_micros(micros)
        return micros, memory_id(last_id)
    except (ValueError, TypeError, binascii.Error, UnicodeEncodeError, OverflowError):
        raise ValidationError.field("cursor", "is not a cursor this service issued") from None
