"""The arguments of the MCP tools: pydantic models whose JSON Schemas the tools publish.

The identifier patterns and kind names are the core's (:mod:`governed_memory.core.values`),
so a tool accepts what the service accepts. The service checks every rule again.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from governed_memory.core.values import (
    ID_PATTERN,
    NAME_PATTERN,
    SLUG_PATTERN,
    KindName,
    anchored,
)

AGENT = anchored(NAME_PATTERN)
PURPOSE = anchored(SLUG_PATTERN)
ID = anchored(ID_PATTERN)


class Args(BaseModel):
    """Arguments of one tool: unknown members are refused."""

    model_config = ConfigDict(extra="forbid")


class ProvenanceArg(Args):
    """Where a memory came from."""

    source: str = Field(
        min_length=1, max_length=256, description="The system or channel, e.g. crm, chat, email."
    )
    ref: str = Field(
        min_length=1, max_length=1024, description="A reference inside it, e.g. a ticket id."
    )
    version: str | None = Field(None, description="The source's version, if it has one.")


class RememberArgs(Args):
    agent_id: str = Field(
        pattern=AGENT, description="The agent the memory belongs to (your API key must allow it)."
    )
    subject_id: str = Field(
        pattern=AGENT, description="Whom or what the memory is about: a customer, user, repo…"
    )
    purpose: str = Field(
        pattern=PURPOSE, description="What it is for, e.g. support; recall filters on it."
    )
    kind: KindName = Field(
        description="fact, preference, skill or working_note; each kind has its own lifetime."
    )
    content: str = Field(
        min_length=1,
        description="One self-contained statement worth keeping (1..8,000 characters), "
        "not a transcript. Never include secrets.",
        json_schema_extra={"maxLength": 8000},
    )
    provenance: ProvenanceArg = Field(
        description="Where the statement came from; source and ref are required."
    )
    confidence: float | None = Field(
        None, ge=0, le=1, description="0..1, your confidence: a ranking hint, never trust."
    )
    ttl_seconds: int | None = Field(
        None, ge=1, description="Lifetime in seconds; the kind's default when omitted."
    )


class CorrectArgs(RememberArgs):
    supersedes_id: str = Field(
        pattern=ID,
        description="The id of the active memory this one corrects (same agent and purpose).",
    )


class RecallArgs(Args):
    agent_id: str = Field(pattern=AGENT, description="The agent whose memories to search.")
    purpose: str = Field(pattern=PURPOSE, description="Only memories written for this purpose.")
    query: str = Field(
        min_length=1,
        max_length=1000,
        description="What to look for: words, matched after stemming (and by meaning where "
        "the server has semantic recall on).",
    )
    subject_id: str | None = Field(
        None, pattern=AGENT, description="Only memories about this subject."
    )
    kinds: list[KindName] | None = Field(None, min_length=1, description="Only these kinds.")
    limit: int = Field(10, ge=1, le=100, description="At most this many memories.")
    token_budget: int = Field(
        1000, ge=1, le=32_000, description="The whole text block fits in this many tokens."
    )


class ListQuarantineArgs(Args):
    agent_id: str | None = Field(None, pattern=AGENT, description="Only this agent's items.")
    purpose: str | None = Field(None, pattern=PURPOSE, description="Only this purpose.")
    limit: int = Field(20, ge=1, le=500, description="At most this many items.")
    cursor: str | None = Field(None, description="next_cursor of the previous page.")


class PromoteArgs(Args):
    id: str = Field(pattern=ID, description="The quarantined memory's id.")
    expected_version: int = Field(ge=1, description="Its version as listed (optimistic lock).")


class RejectArgs(PromoteArgs):
    reason: str | None = Field(
        None, min_length=1, max_length=1000, description="Why, for the audit trail."
    )


__all__ = [
    "Args",
    "CorrectArgs",
    "ListQuarantineArgs",
    "PromoteArgs",
    "ProvenanceArg",
    "RecallArgs",
    "RejectArgs",
    "RememberArgs",
]
