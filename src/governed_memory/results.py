"""What the service returns: plain frozen values with their JSON forms.

Every adapter (HTTP, CLI, client, MCP) serializes these through ``to_dict``; the client
parses the same shapes back into the same types.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from governed_memory.core.model import ItemState, MemoryItem
from governed_memory.core.values import from_micros, memory_id, rfc3339, to_micros
from governed_memory.errors import ValidationError


@dataclass(frozen=True, slots=True)
class WriteResult:
    """The item a write produced, and whether it created the item."""

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


@dataclass(frozen=True, slots=True)
class QuarantinePage:
    """One page of the review queue and the cursor of the next page."""

    items: list[MemoryItem]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """The outcome of rebuilding the projection from the log and comparing it."""

    events: int
    items: int
    differences: list[str]

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
