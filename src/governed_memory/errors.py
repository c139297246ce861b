"""The error tree of governed-memory: every error this package raises on purpose.

Every boundary (HTTP, CLI, client, MCP) translates these classes once, by class, never by
message. Each class names its problem ``slug`` once, here: the HTTP layer's problem table
adds only the status, and the client maps a problem's type back to the class through the
same slugs. Messages carry ids, versions and field names, never memory content.

::

    GovernedMemoryError            (500, internal) anything not more specific
    ├── ValidationError            (422) bad input; ``errors`` lists offending fields
    ├── AuthenticationError        (401) missing, unknown or revoked credential
    ├── PermissionDenied           (403) scope, agent or trust not allowed
    │   └── SelfPromotion          (403) a principal reviewing its own write
    ├── NotFound                   (404) unknown id, or another tenant's or agent's item
    ├── Conflict                   (409)
    │   ├── VersionConflict        expected_version does not match; carries current_version
    │   ├── InvalidTransition      e.g. promoting an item that is not quarantined
    │   └── IdempotencyKeyReused   the same key with a different request
    ├── RateLimited                (429) carries retry_after seconds
    ├── PayloadTooLarge            (413)
    ├── StoreUnavailable           (503) the store cannot be reached (or, for this instance,
    │                              its search index was rebuilt with other settings)
    ├── MalformedRequest           (400) edge only: the request could not be parsed
    ├── MethodNotAllowed           (405) edge only: the route exists, not with this method
    ├── UnsupportedMediaType       (415) edge only: a body that is not UTF-8 application/json
    ├── ConfigError                start-up only: a setting is invalid
    ├── CryptoError                (500) a blob failed authentication; a key is malformed
    └── StoreSignal                never leaves the process: a store tells the service
        ├── IdempotencyKeyTaken    a concurrent request committed the same key first
        ├── SubjectKeyGone         the key that sealed a write was destroyed meanwhile
        ├── SubjectChanged         a forget would leave an item of the subject undeleted
        └── ReadWouldWait          a read asked not to wait could not be answered at once

A problem's ``type`` is :data:`TYPE_PREFIX` followed by the slug. Three exceptions stay
outside the tree on purpose, because no caller can cause them and none is translated into
an answer: ``core.projection.ProjectionError`` and ``codec.CodecError`` say the stored log
itself is inconsistent (a bug or a damaged store: HTTP answers the bare 500, the CLI one
line; ``gmem import`` turns a bad line into a ValidationError), and the CLI's
``CommandError`` is only the one line a command prints before it exits non-zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:  # the record type only; errors import nothing at run time
    from governed_memory.records import IdempotencyRecord

#: The prefix of every problem ``type`` the HTTP API answers: ``urn:gmem:problem:<slug>``.
TYPE_PREFIX = "urn:gmem:problem:"


@dataclass(frozen=True, slots=True)
class FieldError:
    """One offending input field: where it is and what is wrong (never its value)."""

    field: str
    message: str


class GovernedMemoryError(Exception):
    """Base class of every error this package raises on purpose."""

    title: ClassVar[str] = "Internal server error"
    slug: ClassVar[str] = "internal"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ValidationError(GovernedMemoryError):
    """The input breaks a rule of the specification; nothing was written."""

    title = "Validation failed"
    slug: ClassVar[str] = "validation"

    def __init__(self, detail: str, errors: Sequence[FieldError] = ()) -> None:
        super().__init__(detail)
        self.errors: tuple[FieldError, ...] = tuple(errors) or (FieldError("", detail),)

    @classmethod
    def field(cls, field: str, message: str) -> ValidationError:
        """A validation error about a single field."""
        return cls(f"{field}: {message}" if field else message, [FieldError(field, message)])


class AuthenticationError(GovernedMemoryError):
    """The caller could not be identified."""

    title = "Authentication required"
    slug: ClassVar[str] = "unauthenticated"


class PermissionDenied(GovernedMemoryError):
    """The caller is known but may not do this."""

    title = "Permission denied"
    slug: ClassVar[str] = "forbidden"


class SelfPromotion(PermissionDenied):
    """A principal tried to review an item it wrote itself."""

    title = "Self-review is not allowed"
    slug: ClassVar[str] = "self-review"


class NotFound(GovernedMemoryError):
    """The item does not exist for this caller (unknown, or another tenant's or agent's)."""

    title = "Not found"
    slug: ClassVar[str] = "not-found"


class Conflict(GovernedMemoryError):
    """The request conflicts with the current state."""

    title = "Conflict"
    slug: ClassVar[str] = "conflict"


class VersionConflict(Conflict):
    """The expected version is not the item's current version."""

    title = "Version conflict"
    slug: ClassVar[str] = "version-conflict"

    def __init__(self, memory_id: str, expected: int, current: int) -> None:
        super().__init__(
            f"memory {memory_id!r} is at version {current}, not the expected {expected}"
        )
        self.memory_id = memory_id
        self.expected_version = expected
        self.current_version = current


class InvalidTransition(Conflict):
    """The item's status does not allow this change."""

    title = "Invalid status transition"
    slug: ClassVar[str] = "invalid-transition"

    def __init__(self, detail: str, current_version: int | None = None) -> None:
        super().__init__(detail)
        self.current_version = current_version


class IdempotencyKeyReused(Conflict):
    """The idempotency key was already used for a different request."""

    title = "Idempotency key reused"
    slug: ClassVar[str] = "idempotency-key-reused"


class RateLimited(GovernedMemoryError):
    """Too many requests in the current window."""

    title = "Too many requests"
    slug: ClassVar[str] = "rate-limited"

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class PayloadTooLarge(GovernedMemoryError):
    """The request body is over the configured limit."""

    title = "Payload too large"
    slug: ClassVar[str] = "payload-too-large"


class StoreUnavailable(GovernedMemoryError):
    """The storage backend cannot be reached or is not ready."""

    title = "Service unavailable"
    slug: ClassVar[str] = "unavailable"

    @classmethod
    def index_rebuilt(cls) -> StoreUnavailable:
        """The store's search index was rebuilt (``gmem reindex``) with other settings than
        this instance's since it started: its terms would miss or mix, so it serves no
        search and indexes nothing until restarted with those settings."""
        return cls(
            "the search index was rebuilt with other settings since this instance started: "
            "restart it with the settings `gmem reindex` used"
        )


class MalformedRequest(GovernedMemoryError):
    """The request could not be parsed (e.g. its body is not JSON); HTTP edge only."""

    title = "Malformed request"
    slug: ClassVar[str] = "malformed-request"


class UnsupportedMediaType(GovernedMemoryError):
    """The request body is not ``application/json`` in UTF-8; HTTP edge only."""

    title = "Unsupported media type"
    slug: ClassVar[str] = "unsupported-media-type"


class MethodNotAllowed(GovernedMemoryError):
    """The route exists but not with this method; HTTP edge only."""

    title = "Method not allowed"
    slug: ClassVar[str] = "method-not-allowed"


class ConfigError(GovernedMemoryError):
    """A setting is invalid; the service must not start."""

    title = "Invalid configuration"
    slug: ClassVar[str] = "invalid-configuration"


class CryptoError(GovernedMemoryError):
    """A blob failed authentication, or a key is missing or malformed."""

    title = "Cryptographic failure"
    slug: ClassVar[str] = "internal"


class StoreSignal(GovernedMemoryError):
    """A store tells the service something it must handle; never leaves the process.

    Its title and slug are the base class's: were one to escape, it would be a bare 500.
    """


class IdempotencyKeyTaken(StoreSignal):
    """A concurrent request committed the same idempotency key first."""

    def __init__(self, record: IdempotencyRecord) -> None:
        super().__init__(f"idempotency key already recorded for tenant {record.tenant_id!r}")
        self.record = record


class SubjectKeyGone(StoreSignal):
    """The subject key that sealed a write was destroyed before the write committed."""


class SubjectChanged(StoreSignal):
    """A forget would leave an item of the subject undeleted (one was written meanwhile)."""


class ReadWouldWait(StoreSignal):
    """A read asked not to wait could not be answered at once (see ``ApiKeys.api_key``)."""


__all__ = [
    "TYPE_PREFIX",
    "AuthenticationError",
    "ConfigError",
    "Conflict",
    "CryptoError",
    "FieldError",
    "GovernedMemoryError",
    "IdempotencyKeyReused",
    "IdempotencyKeyTaken",
    "InvalidTransition",
    "MalformedRequest",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "RateLimited",
    "ReadWouldWait",
    "SelfPromotion",
    "StoreSignal",
    "StoreUnavailable",
    "SubjectChanged",
    "SubjectKeyGone",
    "UnsupportedMediaType",
    "ValidationError",
    "VersionConflict",
]
