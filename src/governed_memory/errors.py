"""The error tree of governed-memory, raised by the core and the service.

Every boundary (HTTP, CLI, client) translates these classes once, by class, never by
message. Messages carry ids, versions and field names, never memory content.

::

    GovernedMemoryError
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
    └── StoreUnavailable           (503) the store cannot be reached
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldError:
    """One offending input field: where it is and what is wrong (never its value)."""

    field: str
    message: str


class GovernedMemoryError(Exception):
    """Base class of every error this package raises on purpose."""

    title = "Governed memory error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ValidationError(GovernedMemoryError):
    """The input breaks a rule of the specification; nothing was written."""

    title = "Validation failed"

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


class PermissionDenied(GovernedMemoryError):
    """The caller is known but may not do this."""

    title = "Permission denied"


class SelfPromotion(PermissionDenied):
    """A principal tried to review an item it wrote itself."""

    title = "Self-review is not allowed"


class NotFound(GovernedMemoryError):
    """The item does not exist for this caller (unknown, or another tenant's or agent's)."""

    title = "Not found"


class Conflict(GovernedMemoryError):
    """The request conflicts with the current state."""

    title = "Conflict"


class VersionConflict(Conflict):
    """The expected version is not the item's current version."""

    title = "Version conflict"

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

    def __init__(self, detail: str, current_version: int | None = None) -> None:
        super().__init__(detail)
        self.current_version = current_version


class IdempotencyKeyReused(Conflict):
    """The idempotency key was already used for a different request."""

    title = "Idempotency key reused"


class RateLimited(GovernedMemoryError):
    """Too many requests in the current window."""

    title = "Too many requests"

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class PayloadTooLarge(GovernedMemoryError):
    """The request body is over the configured limit."""

    title = "Payload too large"


class StoreUnavailable(GovernedMemoryError):
    """The storage backend cannot be reached or is not ready."""

    title = "Service unavailable"


__all__ = [
    "AuthenticationError",
    "Conflict",
    "FieldError",
    "GovernedMemoryError",
    "IdempotencyKeyReused",
    "InvalidTransition",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "RateLimited",
    "SelfPromotion",
    "StoreUnavailable",
    "ValidationError",
    "VersionConflict",
]
