"""Values and validation rules of SPEC §3 and §13."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_memory.core import values as v
from governed_memory.errors import ValidationError


@pytest.mark.parametrize("good", ["a", "A.b_c:d-9", "x" * 128])
def test_memory_ids_follow_the_pattern(good: str) -> None:
    """Ids of 1..128 characters from [A-Za-z0-9._:-] are accepted."""
    assert v.memory_id(good) == good


@pytest.mark.parametrize("bad", ["", "x" * 129, "has space", "slash/", "star*", "é", 5, None])
def test_memory_ids_outside_the_pattern_are_refused(bad: object) -> None:
    """Anything else is refused before it reaches a query."""
    with pytest.raises(ValidationError):
        v.memory_id(bad)


@pytest.mark.parametrize("bad", ["Acme", "-acme", "", "a" * 65, "acme corp"])
def test_tenant_and_purpose_ids_are_lowercase_slugs(bad: str) -> None:
    """Tenants and purposes start with [a-z0-9] and stay in [a-z0-9._-], up to 64."""
    with pytest.raises(ValidationError):
        v.tenant_id(bad)
    with pytest.raises(ValidationError):
        v.purpose(bad)


def test_content_is_nfc_normalized() -> None:
    """Decomposed accents are composed so hashes and searches agree."""
    assert v.content("cafe\u0301") == "caf\u00e9"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("a\x00b", "NUL"),
        ("a\ud800b", "surrogates"),
        ("", "at least 1"),
        (" \n\t", "at least 1"),
        ("x" * 8001, "at most 8000"),
        (b"bytes", "string"),
    ],
)
def test_bad_content_is_refused_with_a_reason(bad: object, message: str) -> None:
    """NUL, lone surrogates, blank and oversized content are refused, naming the rule."""
    with pytest.raises(ValidationError, match=message):
        v.content(bad)


def test_the_length_limit_counts_characters_after_normalization() -> None:
    """8,000 composed characters are fine even if the raw input was longer."""
    assert len(v.content("e\u0301" * 8000)) == 8000


@pytest.mark.parametrize("bad", [-0.1, 1.01, float("nan"), float("inf"), "0.5", True])
def test_confidence_is_a_number_between_0_and_1(bad: object) -> None:
    """Confidence outside [0, 1], non-finite or non-numeric is refused."""
    with pytest.raises(ValidationError):
        v.confidence(bad)


def test_timestamps_need_an_offset_and_become_utc() -> None:
    """RFC 3339 with an offset is converted to UTC; naive times are refused."""
    at = v.utc("2027-01-01T02:00:00+02:00", "expires_at")
    assert at == datetime(2027, 1, 1, tzinfo=UTC)
    with pytest.raises(ValidationError):
        v.utc("2027-01-01T02:00:00", "expires_at")
    with pytest.raises(ValidationError):
        v.utc("tomorrow", "expires_at")


def test_micros_round_trip() -> None:
    """The storage form of instants is exact to the microsecond."""
    at = datetime(2026, 12, 2, 9, 30, 1, 123456, tzinfo=timezone(timedelta(hours=1)))
    assert v.from_micros(v.to_micros(at)) == at
    assert v.rfc3339(at) == "2026-12-02T08:30:01.123456Z"


# The instants a datetime can hold, as microseconds since the epoch (year 1 to 9999).
FIRST_MICROS = v.to_micros(datetime.min.replace(tzinfo=UTC))
LAST_MICROS = v.to_micros(datetime.max.replace(tzinfo=UTC))


@given(st.integers(min_value=FIRST_MICROS, max_value=LAST_MICROS))
def test_every_stored_instant_reads_back_as_the_instant_it_counts(micros: int) -> None:
    """A stored count of microseconds is that many after the epoch, and back again."""
    at = v.from_micros(micros)
    assert at == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
    assert at.tzinfo is UTC
    assert v.to_micros(at) == micros


@pytest.mark.parametrize("micros", [FIRST_MICROS - 1, LAST_MICROS + 1, 10**30, -(10**30)])
def test_a_stored_instant_no_datetime_can_hold_is_refused(micros: int) -> None:
    with pytest.raises(OverflowError):
        v.from_micros(micros)


def test_provenance_requires_source_and_ref_and_nothing_else() -> None:
    """Provenance is required, closed, and validated like any text."""
    assert v.Provenance.parse({"source": "crm", "ref": "t-1"}).version is None
    for bad in [{"source": "crm"}, {"source": "crm", "ref": "t", "trust": "verified"}, "crm"]:
        with pytest.raises(ValidationError):
            v.Provenance.parse(bad)


def test_idempotency_keys_are_visible_ascii() -> None:
    """1..255 characters between ! and ~."""
    assert v.idempotency_key("abc-123_~!") == "abc-123_~!"
    for bad in ["", "a b", "x" * 256, "ключ"]:
        with pytest.raises(ValidationError):
            v.idempotency_key(bad)


@pytest.mark.parametrize("edge", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_timestamps_at_the_edge_of_the_calendar_are_validation_errors(edge: str) -> None:
    """An instant that cannot be expressed in UTC is refused, not a crash."""
    with pytest.raises(ValidationError, match="representable"):
        v.utc(edge, "expires_at")
