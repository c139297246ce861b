"""One command type per intent. ``parse`` validates raw input and lists every bad field."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from governed_memory.core import values as v
from governed_memory.core.retrieval import SearchQuery
from governed_memory.core.values import Kind, Provenance, Trust
from governed_memory.errors import FieldError, ValidationError

T = TypeVar("T")

WRITE_FIELDS = frozenset(
    {
        "id",
        "agent_id",
        "subject_id",
        "purpose",
        "kind",
        "content",
        "provenance",
        "trust",
        "confidence",
        "expires_at",
        "ttl_seconds",
        "supersedes_id",
        "expected_version",
    }
)


class _Collector:
    """Runs field validators and gathers every failure instead of stopping at the first."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def check(self, validate: Callable[..., T], *args: Any) -> T | None:
        """``validate(*args)``, or ``None`` with its failures gathered."""
        try:
            return validate(*args)
        except ValidationError as error:
            self.errors.extend(error.errors)
            return None

    def optional(self, value: object, validate: Callable[..., T], *args: Any) -> T | None:
        """``None`` for an absent value (``None``), else :meth:`check` of it."""
        return None if value is None else self.check(validate, value, *args)

    def raise_if_any(self) -> None:
        if self.errors:
            fields = ", ".join(sorted({e.field for e in self.errors if e.field}))
            raise ValidationError(
                f"invalid fields: {fields}" if fields else "invalid input", self.errors
            )


def bounded_int(value: object, field: str, low: int, high: int | None = None) -> int:
    """An integer (never a bool) from ``low`` up to ``high``, or without a ceiling."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError.field(field, "must be an integer")
    if high is None and value < low:
        raise ValidationError.field(field, f"must be {low} or more")
    if high is not None and not low <= value <= high:
        raise ValidationError.field(field, f"must be between {low} and {high}")
    return value


def version(value: object, field: str = "expected_version") -> int:
    """A version number: an integer ≥ 0 (0 means the item must not exist yet)."""
    return bounded_int(value, field, 0)


def _refuse_unknown(raw: Mapping[str, Any], known: frozenset[str]) -> None:
    if known.issuperset(raw):
        return
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValidationError(
            "unknown fields: " + ", ".join(unknown),
            [FieldError(name, "is not a known field") for name in unknown],
        )


def _optional(
    raw: Mapping[str, Any], name: str, validate: Callable[[Any], T]
) -> Callable[[], T | None]:
    def run() -> T | None:
        value = raw.get(name)
        return None if value is None else validate(value)

    return run


def _or(raw: Mapping[str, Any], name: str, default: object) -> object:
    value = raw.get(name)
    return default if value is None else value


def _ttl(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError.field("ttl_seconds", "must be an integer")
    if value < 1:
        raise ValidationError.field("ttl_seconds", "must be a positive number of seconds")
    return value


@dataclass(frozen=True, slots=True)
class WriteMemory:
    """Create an item (``expected_version`` 0) or rewrite it (its current version)."""

    memory_id: str | None
    agent_id: str
    subject_id: str
    purpose: str
    kind: Kind
    content: str
    provenance: Provenance
    trust: Trust
    confidence: float
    expected_version: int
    expires_at: datetime | None = None
    ttl_seconds: int | None = None
    supersedes_id: str | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> WriteMemory:
        """Validate a write given as a mapping; ``None`` means absent (SPEC §13)."""
        _refuse_unknown(raw, WRITE_FIELDS)
        c, get = _Collector(), raw.get  # validators called directly: no closure per field
        memory_id = c.optional(get("id"), v.memory_id)
        agent = c.check(v.agent_id, get("agent_id"))
        subject = c.check(v.subject_id, get("subject_id"))
        purpose = c.check(v.purpose, get("purpose"))
        kind = c.check(v.enum_value, Kind, get("kind"), "kind")
        content = c.check(v.content, get("content"))
        provenance = c.check(Provenance.parse, get("provenance"))
        trust = c.check(v.enum_value, Trust, _or(raw, "trust", "untrusted"), "trust")
        confidence = c.check(v.confidence, _or(raw, "confidence", 0.5))
        expected = c.check(version, get("expected_version"))
        expires_at = c.optional(get("expires_at"), v.utc, "expires_at")
        ttl = c.optional(get("ttl_seconds"), _ttl)
        supersedes = c.optional(get("supersedes_id"), v.memory_id, "supersedes_id")
        if expires_at is not None and ttl is not None:
            c.errors.append(FieldError("ttl_seconds", "give expires_at or ttl_seconds, not both"))
        if trust is Trust.VERIFIED:
            c.errors.append(FieldError("trust", "verified is reached only by promotion"))
        if supersedes is not None and memory_id is not None and supersedes == memory_id:
            c.errors.append(FieldError("supersedes_id", "an item cannot supersede itself"))
        c.raise_if_any()
        assert agent is not None and subject is not None and purpose is not None
        assert kind is not None and content is not None and provenance is not None
        assert trust is not None and confidence is not None and expected is not None
        return cls(
            memory_id=memory_id,
            agent_id=agent,
            subject_id=subject,
            purpose=purpose,
            kind=kind,
            content=content,
            provenance=provenance,
            trust=trust,
            confidence=confidence,
            expected_version=expected,
            expires_at=expires_at,
            ttl_seconds=ttl,
            supersedes_id=supersedes,
        )

    def fingerprint(self, content_hash: str) -> dict[str, Any]:
        """What identifies this request for idempotency, with content only as its keyed hash."""
        return {
            "op": "write",
            "id": self.memory_id,
            "agent_id": self.agent_id,
            "subject_id": self.subject_id,
            "purpose": self.purpose,
            "kind": self.kind.value,
            "content_hash": content_hash,
            "provenance": self.provenance.as_dict(),
            "trust": self.trust.value,
            "confidence": self.confidence,
            "expected_version": self.expected_version,
            "expires_at": None if self.expires_at is None else v.to_micros(self.expires_at),
            "ttl_seconds": self.ttl_seconds,
            "supersedes_id": self.supersedes_id,
        }


@dataclass(frozen=True, slots=True)
class PromoteMemory:
    """A reviewer promotes a quarantined item to active and verified."""

    memory_id: str
    expected_version: int

    def fingerprint(self) -> dict[str, Any]:
        """What identifies this request for idempotency."""
        return {
            "op": "promote",
            "id": self.memory_id,
            "expected_version": self.expected_version,
        }


@dataclass(frozen=True, slots=True)
class RejectMemory:
    """A reviewer rejects a quarantined item, optionally saying why."""

    memory_id: str
    expected_version: int
    reason: str | None = None

    def fingerprint(self) -> dict[str, Any]:
        """What identifies this request for idempotency (the reason only by its length)."""
        return {
            "op": "reject",
            "id": self.memory_id,
            "expected_version": self.expected_version,
            "reason_chars": None if self.reason is None else len(self.reason),
        }


@dataclass(frozen=True, slots=True)
class ForgetSubject:
    """Delete every item of a subject and destroy the subject's key."""

    subject_id: str

    def fingerprint(self) -> dict[str, Any]:
        """What identifies this request for idempotency."""
        return {"op": "forget", "subject_id": self.subject_id}


@dataclass(frozen=True, slots=True)
class EraseMemory:
    """Erase one item: delete it and destroy the content of every version."""

    memory_id: str

    def fingerprint(self) -> dict[str, Any]:
        """What identifies this request for idempotency."""
        return {"op": "erase", "id": self.memory_id}


@dataclass(frozen=True, slots=True)
class ExpireMemory:
    """The expiry worker retires an item whose time-to-live ran out."""

    memory_id: str
    expected_version: int


@dataclass(frozen=True, slots=True)
class DestroyContent:
    """The retention sweep destroys the content of an item past its retention window."""

    memory_id: str
    expected_version: int


Command = (
    WriteMemory
    | PromoteMemory
    | RejectMemory
    | ForgetSubject
    | EraseMemory
    | ExpireMemory
    | DestroyContent
)


SEARCH_FIELDS = frozenset(
    {"agent_id", "purpose", "query", "subject_id", "kinds", "limit", "token_budget"}
)


def _kinds(value: object) -> frozenset[Kind]:
    if not isinstance(value, list | tuple | set | frozenset) or not value:
        raise ValidationError.field("kinds", "must be a non-empty list of kinds")
    return frozenset(v.enum_value(Kind, item, "kinds") for item in value)


def parse_search(raw: Mapping[str, Any]) -> SearchQuery:
    """Validate a search request given as a mapping; ``None`` means absent."""
    _refuse_unknown(raw, SEARCH_FIELDS)
    c = _Collector()
    agent = c.check(lambda: v.agent_id(raw.get("agent_id")))
    purpose = c.check(lambda: v.purpose(raw.get("purpose")))
    query = c.check(
        lambda: v.text(raw.get("query"), "query", max_chars=v.MAX_QUERY_CHARS, min_chars=1)
    )
    subject = c.check(_optional(raw, "subject_id", v.subject_id))
    kinds = c.check(_optional(raw, "kinds", _kinds))
    limit = c.check(_optional(raw, "limit", lambda x: bounded_int(x, "limit", 1, 100)))
    budget = c.check(
        _optional(raw, "token_budget", lambda x: bounded_int(x, "token_budget", 1, 32_000))
    )
    c.raise_if_any()
    assert agent is not None and purpose is not None and query is not None
    return SearchQuery(
        agent_id=agent,
        purpose=purpose,
        query=query,
        subject_id=subject,
        kinds=kinds,
        limit=10 if limit is None else limit,
        token_budget=1000 if budget is None else budget,
    )
