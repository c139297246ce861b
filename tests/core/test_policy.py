"""The per-kind TTL policy (SPEC §3) and the confidence cap (SPEC §2 rule 8)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from governed_memory.core.policy import (
    DAY,
    DEFAULT_TTLS,
    KindPolicy,
    RetentionPolicy,
    TtlPolicy,
    capped_confidence,
)
from governed_memory.core.values import Kind, Status, Trust
from governed_memory.errors import ValidationError
from tests.support.fakes import START


def test_the_default_policy_is_the_specifications() -> None:
    """Working notes 1/7 days, facts 90/730, preferences 180/365, skills 365/730."""
    days = {k: (d // 86_400, m // 86_400) for k, (d, m) in DEFAULT_TTLS.items()}
    assert days == {
        Kind.WORKING_NOTE: (1, 7),
        Kind.FACT: (90, 730),
        Kind.PREFERENCE: (180, 365),
        Kind.SKILL: (365, 730),
    }


def test_kinds_do_not_share_one_ttl() -> None:
    """The same request expires differently for different kinds."""
    policy = TtlPolicy()
    assert policy.expires_at(Kind.WORKING_NOTE, START, None, None) == START + timedelta(days=1)
    assert policy.expires_at(Kind.SKILL, START, None, None) == START + timedelta(days=365)


def test_the_maximum_is_inclusive() -> None:
    """A TTL equal to the kind's maximum is allowed; one second more is not."""
    policy = TtlPolicy()
    seven_days = 7 * 86_400
    assert policy.expires_at(Kind.WORKING_NOTE, START, None, seven_days)
    with pytest.raises(ValidationError):
        policy.expires_at(Kind.WORKING_NOTE, START, None, seven_days + 1)


def test_an_invalid_policy_cannot_be_built() -> None:
    """A default above the maximum or a non-positive default is refused at start-up."""
    with pytest.raises(ValidationError, match="at least the default"):
        TtlPolicy.from_seconds({Kind.FACT: (100, 10)})
    with pytest.raises(ValidationError, match="positive"):
        TtlPolicy.from_seconds({Kind.FACT: (0, 10)})
    with pytest.raises(ValidationError, match="no policy"):
        TtlPolicy({Kind.FACT: KindPolicy(1, 2)})


def test_overrides_keep_the_other_defaults() -> None:
    """Configuring one kind leaves the others at their defaults."""
    policy = TtlPolicy.from_seconds({Kind.FACT: (60, 120)})
    assert policy.kinds[Kind.FACT] == KindPolicy(60, 120)
    assert policy.kinds[Kind.SKILL] == KindPolicy(*DEFAULT_TTLS[Kind.SKILL])


def test_untrusted_confidence_is_capped_and_trusted_is_not() -> None:
    """Claimed confidence is a hint; untrusted claims stop at 0.5."""
    assert capped_confidence(Trust.UNTRUSTED, 0.99) == 0.5
    assert capped_confidence(Trust.UNTRUSTED, 0.2) == 0.2
    assert capped_confidence(Trust.TRUSTED, 0.99) == 0.99


def test_the_default_retention_keeps_content_30_30_and_365_days() -> None:
    """Expired and rejected content is kept 30 days, superseded content 365, for every kind."""
    windows = RetentionPolicy().windows
    assert {seconds // DAY for (_, status), seconds in windows.items()} == {30, 365}
    for kind in Kind:
        assert windows[(kind, Status.EXPIRED)] == 30 * DAY
        assert windows[(kind, Status.REJECTED)] == 30 * DAY
        assert windows[(kind, Status.SUPERSEDED)] == 365 * DAY


@pytest.mark.parametrize(
    "windows",
    [
        {(Kind.FACT, Status.EXPIRED): -1},
        {(Kind.FACT, Status.ACTIVE): 10},
        {(Kind.FACT, Status.DELETED): 10},
    ],
    ids=["negative", "active-has-no-window", "deleted-has-no-window"],
)
def test_a_retention_window_is_validated(windows: dict[tuple[Kind, Status], int]) -> None:
    """A negative window, or one for a status that keeps no content to destroy (or must keep
    it), cannot build a policy."""
    with pytest.raises(ValidationError):
        RetentionPolicy.from_seconds({}, windows)


def test_a_policy_lacking_a_window_cannot_be_built() -> None:
    """Every kind needs a window for each of expired, rejected and superseded."""
    missing = r"retention\.fact\.(expired|rejected|superseded): has no window"
    with pytest.raises(ValidationError, match=missing):
        RetentionPolicy({(Kind.SKILL, Status.EXPIRED): 1})
