"""Per-kind time-to-live and retention policies, and the caps on what a write may claim
(SPEC §2, §3, §7)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from governed_memory.core.model import RETAINED_STATUSES, ItemState
from governed_memory.core.values import Kind, Status, Trust
from governed_memory.errors import ValidationError

DAY = 86_400

#: (default TTL, maximum TTL) in seconds, per kind (SPEC §3).
DEFAULT_TTLS: Mapping[Kind, tuple[int, int]] = {
    Kind.WORKING_NOTE: (1 * DAY, 7 * DAY),
    Kind.FACT: (90 * DAY, 730 * DAY),
    Kind.PREFERENCE: (180 * DAY, 365 * DAY),
    Kind.SKILL: (365 * DAY, 730 * DAY),
}

#: Model-claimed confidence is a ranking hint; untrusted items may not claim more.
UNTRUSTED_CONFIDENCE_CAP = 0.5


@dataclass(frozen=True, slots=True)
class KindPolicy:
    """How long an item of one kind lives when the writer does not say, and at most."""

    default_seconds: int
    max_seconds: int


@dataclass(frozen=True, slots=True)
class TtlPolicy:
    """The TTL policy of every kind; validated when built, so a bad policy cannot start."""

    kinds: Mapping[Kind, KindPolicy] = field(
        default_factory=lambda: {k: KindPolicy(d, m) for k, (d, m) in DEFAULT_TTLS.items()}
    )

    def __post_init__(self) -> None:
        for kind in Kind:
            policy = self.kinds.get(kind)
            if policy is None:
                raise ValidationError.field(f"ttl.{kind.value}", "has no policy")
            if policy.default_seconds < 1:
                raise ValidationError.field(f"ttl.{kind.value}.default", "must be positive")
            if policy.max_seconds < policy.default_seconds:
                raise ValidationError.field(
                    f"ttl.{kind.value}.max", "must be at least the default TTL"
                )

    @classmethod
    def from_seconds(cls, overrides: Mapping[Kind, tuple[int, int]]) -> TtlPolicy:
        """A policy from ``{kind: (default, max)}``, the defaults filling the gaps."""
        merged = dict(DEFAULT_TTLS) | dict(overrides)
        return cls({kind: KindPolicy(d, m) for kind, (d, m) in merged.items()})

    def expires_at(
        self,
        kind: Kind,
        now: datetime,
        expires_at: datetime | None,
        ttl_seconds: int | None,
    ) -> datetime:
        """When an item written ``now`` expires: given, derived from a TTL, or the default."""
        policy = self.kinds[kind]
        if expires_at is not None and ttl_seconds is not None:
            raise ValidationError.field("expires_at", "give expires_at or ttl_seconds, not both")
        if ttl_seconds is not None:
            if ttl_seconds < 1:
                raise ValidationError.field("ttl_seconds", "must be a positive number of seconds")
            if ttl_seconds > policy.max_seconds:
                raise ValidationError.field(
                    "ttl_seconds",
                    f"exceeds the maximum TTL of kind {kind.value} ({policy.max_seconds} s)",
                )
            return now + timedelta(seconds=ttl_seconds)
        if expires_at is None:
            return now + timedelta(seconds=policy.default_seconds)
        if expires_at <= now:
            raise ValidationError.field("expires_at", "must be in the future")
        if expires_at > now + timedelta(seconds=policy.max_seconds):
            raise ValidationError.field(
                "expires_at",
                f"exceeds the maximum TTL of kind {kind.value} ({policy.max_seconds} s)",
            )
        return expires_at


#: How long the content of an item is kept once it entered each status, in seconds:
#: 30 days after it expired or was rejected (time to investigate an incident or a poisoning
#: attempt), 365 days after a correction superseded it (the longest default TTL: what was
#: believed before a correction stays auditable about as long as a memory lives).
DEFAULT_RETENTION: Mapping[Status, int] = {
    Status.EXPIRED: 30 * DAY,
    Status.REJECTED: 30 * DAY,
    Status.SUPERSEDED: 365 * DAY,
}

RetentionKey = tuple[Kind, Status]


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long content is kept after its item became expired, rejected or superseded, per
    kind and status; validated when built. The window counts from the item's entering that
    status (its ``updated_at``); afterwards the expiry worker destroys the content."""

    windows: Mapping[RetentionKey, int] = field(
        default_factory=lambda: {
            (kind, status): seconds
            for kind in Kind
            for status, seconds in DEFAULT_RETENTION.items()
        }
    )

    def __post_init__(self) -> None:
        for kind in Kind:
            for status in RETAINED_STATUSES:
                seconds = self.windows.get((kind, status))
                name = f"retention.{kind.value}.{status.value}"
                if seconds is None:
                    raise ValidationError.field(name, "has no window")
                if seconds < 0:
                    raise ValidationError.field(name, "must be 0 or more seconds")
        extra = set(self.windows) - {(k, s) for k in Kind for s in RETAINED_STATUSES}
        if extra:
            kind, status = sorted(extra)[0]
            raise ValidationError.field(
                f"retention.{kind.value}.{status.value}",
                "only expired, rejected and superseded items have a retention window",
            )

    @classmethod
    def from_seconds(
        cls,
        per_status: Mapping[Status, int],
        per_kind: Mapping[RetentionKey, int] | None = None,
    ) -> RetentionPolicy:
        """A policy from windows per status, overridden per (kind, status); the defaults
        fill the gaps."""
        base = dict(DEFAULT_RETENTION) | dict(per_status)
        windows = {(kind, status): seconds for kind in Kind for status, seconds in base.items()}
        return cls(windows | dict(per_kind or {}))

    def cutoffs(self, now: datetime) -> dict[RetentionKey, datetime]:
        """For each (kind, status): items that entered the status at or before this instant
        are past their window at ``now``."""
        return {key: now - timedelta(seconds=seconds) for key, seconds in self.windows.items()}

    def due(self, item: ItemState, now: datetime) -> bool:
        """Whether ``item`` still holds content its window no longer allows at ``now``."""
        seconds = self.windows.get((item.kind, item.status))
        return (
            seconds is not None
            and item.content is not None
            and item.updated_at <= now - timedelta(seconds=seconds)
        )


def capped_confidence(trust: Trust, confidence: float) -> float:
    """The confidence an item keeps: untrusted claims are capped (SPEC §2 rule 8)."""
    if trust is Trust.UNTRUSTED:
        return min(confidence, UNTRUSTED_CONFIDENCE_CAP)
    return confidence
