"""Values of the domain and the rules that validate them (SPEC §3 and §13).

Every identifier is checked against its pattern before it reaches any query, and every
text field refuses NUL and unpaired surrogates so that every backend stores exactly the
same values. Error messages name the field and the rule, never the offending value.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Literal, TypeVar

from governed_memory.core.frozen import quick_init
from governed_memory.errors import ValidationError

MAX_CONTENT_CHARS = 8_000
MAX_TEXT_CHARS = 1_000
MAX_QUERY_CHARS = 1_000

#: The identifier alphabets of SPEC §3, written once. The core matches them whole; the HTTP
#: schemas and the MCP arguments, whose validators search, use :func:`anchored` copies.
ID_PATTERN = r"[A-Za-z0-9._:-]{1,128}"
#: Tenants and purposes: a lowercase slug.
SLUG_PATTERN = r"[a-z0-9][a-z0-9._-]{0,63}"
#: Agents, subjects and principals.
NAME_PATTERN = r"[A-Za-z0-9._:@-]{1,128}"
IDEMPOTENCY_KEY_PATTERN = r"[\x21-\x7e]{1,255}"

_ID = re.compile(ID_PATTERN)
_SLUG = re.compile(SLUG_PATTERN)
_NAME = re.compile(NAME_PATTERN)
_IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)


def anchored(pattern: str) -> str:
    """``pattern`` for validators that search rather than match whole (JSON Schema, pydantic)."""
    return f"^{pattern}$"


class Kind(StrEnum):
    """What sort of memory an item is; each kind has its own TTL policy."""

    FACT = "fact"
    PREFERENCE = "preference"
    SKILL = "skill"
    WORKING_NOTE = "working_note"


class Trust(StrEnum):
    """How far an item is trusted; ``verified`` is reached only by promotion."""

    UNTRUSTED = "untrusted"
    TRUSTED = "trusted"
    VERIFIED = "verified"


class Status(StrEnum):
    """Where an item is in its lifecycle (see the status transitions of docs/concepts.md)."""

    QUARANTINED = "quarantined"
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    REJECTED = "rejected"
    EXPIRED = "expired"
    DELETED = "deleted"


class Scope(StrEnum):
    """What a credential may do (the scopes of an API key)."""

    MEMORY_WRITE = "memory:write"
    MEMORY_READ = "memory:read"
    MEMORY_REVIEW = "memory:review"
    SUBJECT_FORGET = "subject:forget"
    AUDIT_READ = "audit:read"
    ADMIN = "admin"


#: The enums' values as types, for schemas that list them (HTTP, MCP); a test checks that
#: each lists exactly its enum's values.
KindName = Literal["fact", "preference", "skill", "working_note"]
TrustName = Literal["untrusted", "trusted", "verified"]
StatusName = Literal["quarantined", "active", "superseded", "rejected", "expired", "deleted"]

E = TypeVar("E", bound=StrEnum)

TRUST_RANK = {Trust.UNTRUSTED: 0, Trust.TRUSTED: 1, Trust.VERIFIED: 2}


def _fullmatch(pattern: re.Pattern[str], value: object, field: str, what: str) -> str:
    if not isinstance(value, str):
        raise ValidationError.field(field, "must be a string")
    if pattern.fullmatch(value) is None:
        raise ValidationError.field(field, f"must match the {what} pattern {pattern.pattern}")
    return value


def memory_id(value: object, field: str = "id") -> str:
    """A memory id: ``^[A-Za-z0-9._:-]{1,128}$``."""
    return _fullmatch(_ID, value, field, "id")


def tenant_id(value: object, field: str = "tenant_id") -> str:
    """A tenant id: ``^[a-z0-9][a-z0-9._-]{0,63}$``."""
    return _fullmatch(_SLUG, value, field, "tenant")


def agent_id(value: object, field: str = "agent_id") -> str:
    """An agent id: ``^[A-Za-z0-9._:@-]{1,128}$``."""
    return _fullmatch(_NAME, value, field, "agent")


def subject_id(value: object, field: str = "subject_id") -> str:
    """A subject id: ``^[A-Za-z0-9._:@-]{1,128}$``."""
    return _fullmatch(_NAME, value, field, "subject")


def purpose(value: object, field: str = "purpose") -> str:
    """A purpose: ``^[a-z0-9][a-z0-9._-]{0,63}$``."""
    return _fullmatch(_SLUG, value, field, "purpose")


def principal_id(value: object, field: str = "principal_id") -> str:
    """A principal id (who acts): same alphabet as agent ids."""
    return _fullmatch(_NAME, value, field, "principal")


def idempotency_key(value: object, field: str = "idempotency_key") -> str:
    """An idempotency key: 1..255 visible ASCII characters."""
    return _fullmatch(_IDEMPOTENCY_KEY, value, field, "idempotency key")


def text(value: object, field: str, *, max_chars: int = MAX_TEXT_CHARS, min_chars: int = 0) -> str:
    """Free text: NUL and unpaired surrogates refused, NFC-normalized, length-bounded."""
    if not isinstance(value, str):
        raise ValidationError.field(field, "must be a string")
    if "\x00" in value:
        raise ValidationError.field(field, "must not contain the NUL character")
    if value.isascii():  # no surrogate, and already NFC (most text: no copy made)
        normalized = value
    else:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError.field(field, "must not contain unpaired surrogates") from None
        normalized = unicodedata.normalize("NFC", value)
    if len(normalized) > max_chars:
        raise ValidationError.field(field, f"must be at most {max_chars} characters")
    if len(normalized.strip()) < min_chars:
        raise ValidationError.field(field, f"must have at least {min_chars} non-blank character")
    return normalized


def content(value: object, field: str = "content") -> str:
    """Memory content: 1..8,000 characters after NFC normalization."""
    return text(value, field, max_chars=MAX_CONTENT_CHARS, min_chars=1)


def confidence(value: object, field: str = "confidence") -> float:
    """A confidence between 0 and 1 (a ranking hint, never a reason to trust)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError.field(field, "must be a number")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise ValidationError.field(field, "must be between 0 and 1")
    return number


#: Each string enum's members by value, filled on first use: a lookup instead of iterating
#: the enum (which costs a few microseconds a field on every write).
_BY_VALUE: dict[type[StrEnum], dict[str, Any]] = {}


def enum_value(enum: type[E], value: object, field: str) -> E:
    """One member of a string enum, by value."""
    if isinstance(value, str):
        members = _BY_VALUE.get(enum)
        if members is None:
            members = _BY_VALUE[enum] = {member.value: member for member in enum}
        member: E | None = members.get(value)
        if member is not None:
            return member
    allowed = ", ".join(member.value for member in enum)
    raise ValidationError.field(field, f"must be one of: {allowed}")


def utc(value: object, field: str) -> datetime:
    """A timezone-aware instant, converted to UTC."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValidationError.field(field, "must be an RFC 3339 timestamp") from None
    if not isinstance(value, datetime):
        raise ValidationError.field(field, "must be an RFC 3339 timestamp")
    if value.tzinfo is None:
        raise ValidationError.field(field, "must carry a timezone offset")
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValidationError.field(field, "is out of the representable range") from None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(instant: datetime) -> int:
    """An aware datetime as integer microseconds since the Unix epoch (storage form)."""
    delta = instant - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_MICROSECOND = timedelta(microseconds=1)


def from_micros(micros: int) -> datetime:
    """The inverse of :func:`to_micros`."""
    return _EPOCH + _MICROSECOND * micros  # a third faster than timedelta(0, 0, micros)


def rfc3339(instant: datetime) -> str:
    """An instant as RFC 3339 UTC with a ``Z`` suffix and microseconds."""
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def from_rfc3339(text: str) -> datetime:
    """The instant :func:`rfc3339` wrote; ``ValueError`` if ``text`` is not a timestamp.

    This reads the service's own answers; input from callers goes through :func:`utc`.
    """
    return datetime.fromisoformat(text)


@quick_init
@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a memory came from: required on every write, never set by content."""

    source: str
    ref: str
    version: str | None = None

    @classmethod
    def parse(cls, value: object, field: str = "provenance") -> Provenance:
        """Validate a provenance given as a mapping or a :class:`Provenance`."""
        if isinstance(value, Provenance):
            value = value.as_dict()
        if not isinstance(value, Mapping):
            raise ValidationError.field(field, "must be an object with source and ref")
        extra = set(value) - {"source", "ref", "version"}
        if extra:
            raise ValidationError.field(field, "has unknown fields: " + ", ".join(sorted(extra)))
        source = text(value.get("source"), f"{field}.source", max_chars=256, min_chars=1)
        ref = text(value.get("ref"), f"{field}.ref", max_chars=1024, min_chars=1)
        version = value.get("version")
        if version is not None:
            version = text(version, f"{field}.version", max_chars=256, min_chars=1)
        return cls(source=source, ref=ref, version=version)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"source": self.source, "ref": self.ref, "version": self.version}
