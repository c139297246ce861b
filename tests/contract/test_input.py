"""Input rules (SPEC §13): validation names every bad field, and nothing is half-written."""

from __future__ import annotations

import pytest

from governed_memory.errors import ValidationError
from governed_memory.service import MemoryService
from tests.support.fakes import body, principal, query

WRITER = principal()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"content": "nul \x00 inside"}, "content"),
        ({"content": "lone \ud800 surrogate"}, "content"),
        ({"content": "x" * 8001}, "content"),
        ({"content": "   "}, "content"),
        ({"id": "bad id with spaces"}, "id"),
        ({"id": "x" * 129}, "id"),
        ({"agent_id": "*"}, "agent_id"),
        ({"subject_id": "%"}, "subject_id"),
        ({"purpose": "Support"}, "purpose"),
        ({"kind": "conversation"}, "kind"),
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": True}, "confidence"),
        ({"provenance": {"source": "crm"}}, "provenance.ref"),
        ({"provenance": "crm"}, "provenance"),
        ({"expected_version": -1}, "expected_version"),
        ({"expected_version": "1"}, "expected_version"),
        ({"tenant_id": "globex"}, "tenant_id"),
    ],
)
def test_bad_input_is_refused_with_the_field_named_and_nothing_written(
    service: MemoryService, overrides: dict[str, object], field: str
) -> None:
    """Each invalid field yields a validation error naming it; the log stays empty."""
    with pytest.raises(ValidationError) as caught:
        service.write(WRITER, body(**overrides))
    assert field in [e.field for e in caught.value.errors]
    assert service.store.head() == 0


def test_every_bad_field_is_listed_at_once(service: MemoryService) -> None:
    """Validation reports all offending fields, not just the first."""
    with pytest.raises(ValidationError) as caught:
        service.write(WRITER, body(kind="nope", confidence=7, purpose="BAD"))
    assert {e.field for e in caught.value.errors} == {"kind", "confidence", "purpose"}


def test_errors_never_echo_the_content(service: MemoryService) -> None:
    """A refused write's error message does not contain what was written."""
    canary = "canary-content-55821 " * 500
    with pytest.raises(ValidationError) as caught:
        service.write(WRITER, body(content=canary))
    assert "canary-content-55821" not in str(caught.value)
    assert "canary-content-55821" not in repr(caught.value.errors)


@pytest.mark.parametrize(
    "content",
    [
        "Ünïcödé façade — naïve café",
        "emoji 🧠🔐 and CJK 記憶 and RTL שלום",
        "e\u0301 combining accents normalize",
        "x" * 8000,
        "zero\u200bwidth\u200dspace",
    ],
)
def test_unicode_round_trips(service: MemoryService, content: str) -> None:
    """Content comes back exactly as written (after NFC normalization)."""
    import unicodedata

    item = service.write(WRITER, body(id="u", content=content)).item
    expected = unicodedata.normalize("NFC", content)
    assert item.content == expected
    assert service.get(WRITER, "u").content == expected


def test_a_null_optional_field_means_absent(service: MemoryService) -> None:
    """null for an optional field is the same as leaving it out."""
    item = service.write(
        WRITER, body(id="n", ttl_seconds=None, expires_at=None, supersedes_id=None)
    ).item
    assert item.supersedes_id is None


@pytest.mark.parametrize(
    "overrides",
    [
        {"limit": 0},
        {"limit": 101},
        {"token_budget": 0},
        {"token_budget": 32_001},
        {"query": ""},
        {"query": "q\x00"},
        {"kinds": []},
        {"kinds": ["nope"]},
        {"agent_id": "bad agent"},
        {"tenant_id": "acme"},
    ],
)
def test_bad_search_requests_are_refused(
    service: MemoryService, overrides: dict[str, object]
) -> None:
    """Search input is validated like write input."""
    with pytest.raises(ValidationError):
        service.search(WRITER, query(**overrides))


def test_an_idempotency_key_must_be_visible_ascii(service: MemoryService) -> None:
    """Keys of 1..255 visible ASCII characters only."""
    for key in ["", "has space", "é", "x" * 256]:
        with pytest.raises(ValidationError):
            service.write(WRITER, body(), idempotency_key=key)
    assert service.store.head() == 0
