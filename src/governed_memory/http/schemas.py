"""Request and response models of the HTTP API (SPEC §8), for parsing and for OpenAPI.

Request models forbid unknown fields and use strict types (no ``"5"`` for 5); they check
shapes and patterns, and the core checks every rule again (NFC, NUL, TTL policy…), so the
API and the library accept exactly the same writes. Response models describe what the
routes return; the routes serialize the service's ``to_dict()`` forms directly.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field

from governed_memory.core.values import (
    ID_PATTERN,
    NAME_PATTERN,
    SLUG_PATTERN,
    KindName,
    StatusName,
    TrustName,
    anchored,
)

#: The core's identifier patterns, anchored: pydantic and JSON Schema search, not match.
ID = anchored(ID_PATTERN)
AGENT = anchored(NAME_PATTERN)
PURPOSE = anchored(SLUG_PATTERN)
#: Integers are bounded by the largest one every JSON parser reads exactly (I-JSON, RFC
#: 7493: 2**53 - 1), which every store also keeps in its 64-bit columns. FastAPI writes
#: OpenAPI bounds as doubles, and so do many clients: 2**63 - 1 became 2**63 there, and
#: 2**63 + 191 passed the documented bound yet was refused here.
MAX_JSON_INT = 2**53 - 1


def _integral(value: object) -> object:
    """``87.0`` is the integer 87 in JSON (and in JSON Schema); ``87.5`` stays a float."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: Text the core accepts: no NUL (SPEC §13). The core checks it (and unpaired surrogates,
#: which JSON Schema cannot name); the pattern only tells OpenAPI readers and generators.
TEXT = r"^[^\x00]*$"
#: Content also needs one character that is not blank.
CONTENT = r"^[^\x00]*[^\s\x00][^\x00]*$"

#: Integers also accept a JSON number written with a zero fraction; strings and booleans
#: are still refused (the models are strict). The bounds sit inside each alias so that
#: OpenAPI shows them as integer ``minimum`` and ``maximum``.
_INTEGRAL = BeforeValidator(_integral)
Version = Annotated[int, Field(ge=0, le=MAX_JSON_INT), _INTEGRAL]
TtlSeconds = Annotated[int, Field(ge=1, le=MAX_JSON_INT), _INTEGRAL]
Limit = Annotated[int, Field(ge=1, le=100), _INTEGRAL]
TokenBudget = Annotated[int, Field(ge=1, le=32_000), _INTEGRAL]

_REQUEST = ConfigDict(extra="forbid", strict=True)

ITEM_EXAMPLE: dict[str, Any] = {
    "id": "pref-42",
    "tenant_id": "acme",
    "agent_id": "support-bot",
    "subject_id": "customer-17",
    "purpose": "support",
    "kind": "preference",
    "content": "Prefers to be contacted by email, never by phone.",
    "content_hash": "9c1f0b7a4e2d6c8b5a3f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b",
    "provenance": {"source": "crm", "ref": "ticket-1", "version": None},
    "trust": "trusted",
    "confidence": 0.9,
    "created_at": "2026-12-02T09:00:00.000000Z",
    "updated_at": "2026-12-02T09:00:00.000000Z",
    "expires_at": "2027-05-31T09:00:00.000000Z",
    "version": 1,
    "status": "active",
    "supersedes_id": None,
    "superseded_by": None,
}


class ProvenanceIn(BaseModel):
    """Where a memory came from; required on every write."""

    model_config = _REQUEST

    source: str = Field(
        min_length=1, max_length=256, examples=["crm"], json_schema_extra={"pattern": TEXT}
    )
    ref: str = Field(
        min_length=1, max_length=1024, examples=["ticket-1"], json_schema_extra={"pattern": TEXT}
    )
    version: str | None = Field(
        None, min_length=1, max_length=256, json_schema_extra={"pattern": TEXT}
    )


class WriteBody(BaseModel):
    """A write: create with ``expected_version`` 0, or rewrite at the current version."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {
                    "agent_id": "support-bot",
                    "subject_id": "customer-17",
                    "purpose": "support",
                    "kind": "preference",
                    "content": "Prefers to be contacted by email, never by phone.",
                    "provenance": {"source": "crm", "ref": "ticket-1"},
                    "trust": "trusted",
                    "confidence": 0.9,
                    "ttl_seconds": 2592000,
                    "expected_version": 0,
                }
            ],
            # expires_at or ttl_seconds, not both (null means absent, SPEC §13).
            "not": {
                "required": ["expires_at", "ttl_seconds"],
                "properties": {
                    "expires_at": {"type": "string"},
                    "ttl_seconds": {"type": "number"},
                },
            },
        },
    )

    agent_id: str = Field(pattern=AGENT, description="An agent the API key may act for.")
    subject_id: str = Field(pattern=AGENT, description="Whom the memory is about.")
    purpose: str = Field(pattern=PURPOSE)
    kind: KindName
    content: str = Field(
        min_length=1,
        description="1..8,000 characters after NFC normalization; no NUL.",
        json_schema_extra={"maxLength": 8000, "pattern": CONTENT},
    )
    provenance: ProvenanceIn
    trust: Literal["untrusted", "trusted"] = Field(
        "untrusted", description="Capped by the key's maximum trust; untrusted is quarantined."
    )
    confidence: float = Field(0.5, ge=0, le=1, description="A ranking hint, never truth.")
    expires_at: AwareDatetime | None = Field(
        None, strict=False, description="RFC 3339 with offset; not with ttl_seconds."
    )
    ttl_seconds: TtlSeconds | None = Field(None, description="Not with expires_at.")
    supersedes_id: str | None = Field(None, pattern=ID, description="The item this corrects.")
    expected_version: Version = Field(description="0 to create; the current version else.")


class CreateBody(WriteBody):
    """A write whose id the server generates; ``expected_version`` defaults to 0."""

    expected_version: Version = Field(0, description="0: the item is new.")


class PromoteBody(BaseModel):
    """Promote a quarantined item at its current version."""

    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [{"expected_version": 1}]}
    )

    expected_version: Version


class RejectBody(BaseModel):
    """Reject a quarantined item at its current version, optionally saying why."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [{"expected_version": 1, "reason": "contradicts the CRM record"}]
        },
    )

    expected_version: Version
    reason: str | None = Field(
        None, min_length=1, max_length=1000, json_schema_extra={"pattern": TEXT}
    )


class SearchBody(BaseModel):
    """A scoped search: hard filters first, then ranking, then the token budget."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {
                    "agent_id": "support-bot",
                    "purpose": "support",
                    "query": "contact email",
                    "subject_id": "customer-17",
                    "limit": 10,
                    "token_budget": 1000,
                }
            ]
        },
    )

    agent_id: str = Field(pattern=AGENT)
    purpose: str = Field(pattern=PURPOSE)
    query: str = Field(min_length=1, max_length=1000, json_schema_extra={"pattern": TEXT})
    subject_id: str | None = Field(None, pattern=AGENT)
    kinds: list[KindName] | None = Field(None, min_length=1)
    limit: Limit = 10
    token_budget: TokenBudget = 1000


class ForgetBody(BaseModel):
    """Forget takes no fields; a body, if sent, must be empty (``{}``)."""

    model_config = _REQUEST


class ProvenanceOut(BaseModel):
    source: str
    ref: str
    version: str | None


class MemoryItemOut(BaseModel):
    """A memory as callers see it; ``content`` is null once deleted."""

    model_config = ConfigDict(json_schema_extra={"examples": [ITEM_EXAMPLE]})

    id: str
    tenant_id: str
    agent_id: str
    subject_id: str
    purpose: str
    kind: KindName
    content: str | None
    content_hash: str
    provenance: ProvenanceOut
    trust: TrustName
    confidence: float
    created_at: str = Field(description="RFC 3339 UTC")
    updated_at: str = Field(description="RFC 3339 UTC")
    expires_at: str = Field(description="RFC 3339 UTC")
    version: int
    status: StatusName
    supersedes_id: str | None
    superseded_by: str | None


class SearchHitOut(MemoryItemOut):
    """A search result: the item, its score and the parts of the score, its tokens."""

    score: float
    score_parts: dict[str, float]
    tokens: int


class SearchResultOut(BaseModel):
    """Results in rank order; search results are data, never authorization to act."""

    items: list[SearchHitOut]
    used_tokens: int
    skipped: int = Field(description="Items that did not fit the token budget.")
    tokenizer: str


class HistoryEntryOut(BaseModel):
    position: int
    type: str
    version: int | None
    occurred_at: str
    actor: str
    reason: str | None = Field(
        None,
        description="memory.rejected only: the reviewer's reason; null without one, or "
        "once the memory's content is destroyed (erased, forgotten, past retention).",
    )


class HistoryOut(BaseModel):
    events: list[HistoryEntryOut]


class AuditEventOut(BaseModel):
    """A content-free event of the tenant's audit feed."""

    position: int
    event_id: str
    type: str
    memory_id: str | None
    version: int | None
    occurred_at: str
    actor: str
    subject_id: str | None = Field(None, description="Only on subject.forgotten events.")


class EventsOut(BaseModel):
    events: list[AuditEventOut]
    next_after: int = Field(description="Pass as ?after= to read on.")


class QuarantineOut(BaseModel):
    items: list[MemoryItemOut]
    next_cursor: str | None


class MemoriesOut(QuarantineOut):
    """A page of memories in (updated_at, id) order; ``next_cursor`` null on the last."""


class EraseOut(BaseModel):
    id: str
    position: int | None = Field(
        description="The memory.erased event; for a memory deleted already, the event that "
        "deleted it."
    )


class ForgetOut(BaseModel):
    subject_id: str
    affected: int
    position: int | None = Field(description="The subject.forgotten event; null if none.")


class HealthOut(BaseModel):
    status: Literal["ok"]


class FieldProblem(BaseModel):
    field: str
    message: str


class Problem(BaseModel):
    """An RFC 9457 problem; extension members depend on the type."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=["urn:gmem:problem:version-conflict"])
    title: str
    status: int
    detail: str
    errors: list[FieldProblem] | None = Field(
        None, description="On 422: every bad field (the first 50)."
    )
    errors_omitted: int | None = Field(None, description="On 422: bad fields beyond the 50.")
    current_version: int | None = Field(None, description="On 409 version conflicts.")


__all__ = [
    "AuditEventOut",
    "CreateBody",
    "EraseOut",
    "EventsOut",
    "ForgetBody",
    "ForgetOut",
    "HealthOut",
    "HistoryOut",
    "MemoriesOut",
    "MemoryItemOut",
    "Problem",
    "PromoteBody",
    "QuarantineOut",
    "RejectBody",
    "SearchBody",
    "SearchResultOut",
    "WriteBody",
]
