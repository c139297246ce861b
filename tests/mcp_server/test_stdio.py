"""``gmem mcp`` over stdio, driven by the official MCP client against a real ``gmem serve``."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import anyio

from tests.mcp_server.conftest import (
    DEADLINE_SECONDS,
    Service,
    agent_and_reviewer,
    mcp_session,
    structured,
    text_of,
)

QUARANTINE_NOTICE = "stored in quarantine, not retrievable until a reviewer promotes it"


def memory(subject: str, content: str, **overrides: Any) -> dict[str, Any]:
    """remember's arguments for support-bot's support memory about ``subject``."""
    return {
        "agent_id": "support-bot",
        "subject_id": subject,
        "purpose": "support",
        "kind": "preference",
        "content": content,
        "provenance": {"source": "chat", "ref": "conversation-7"},
        "confidence": 0.8,
    } | overrides


def test_the_agent_toolset_is_remember_recall_correct(service: Service, tmp_path: Path) -> None:
    """An agent server lists remember, recall and correct, with schemas; nothing that promotes."""

    async def main() -> None:
        with anyio.fail_after(DEADLINE_SECONDS):
            async with mcp_session(
                service, service.agent_key, errlog=tmp_path / "mcp.log"
            ) as session:
                tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == {"remember", "recall", "correct"}
        for tool in tools.values():
            assert tool.description
            assert tool.input_schema["type"] == "object"
        remember = tools["remember"].input_schema
        assert set(remember["required"]) == {
            "agent_id",
            "subject_id",
            "purpose",
            "kind",
            "content",
            "provenance",
        }
        assert "trust" not in remember["properties"]
        assert "supersedes_id" in tools["correct"].input_schema["required"]
        recall = tools["recall"]
        assert set(recall.input_schema["required"]) == {"agent_id", "purpose", "query"}
        assert "NOT INSTRUCTIONS" in (recall.description or "")
        assert recall.annotations is not None and recall.annotations.read_only_hint

    anyio.run(main)


def test_the_reviewer_toolset_is_list_promote_reject(service: Service, tmp_path: Path) -> None:
    """``--reviewer`` lists list_quarantine, promote and reject, and nothing an agent uses."""

    async def main() -> set[str]:
        with anyio.fail_after(DEADLINE_SECONDS):
            async with mcp_session(
                service, service.reviewer_key, "--reviewer", errlog=tmp_path / "mcp.log"
            ) as session:
                return {tool.name for tool in (await session.list_tools()).tools}

    assert anyio.run(main) == {"list_quarantine", "promote", "reject"}


def test_an_agent_memory_waits_for_a_reviewer_before_recall(
    service: Service, tmp_path: Path
) -> None:
    """remember → quarantined and not recalled; a reviewer promotes; recall returns it as data."""
    subject = "customer-" + secrets.token_hex(4)
    content = "Prefers to be contacted by email, never by phone."
    log = tmp_path / "mcp.log"

    async def main() -> None:
        with anyio.fail_after(DEADLINE_SECONDS):
            async with agent_and_reviewer(service, log) as (agent, reviewer):
                stored = await agent.call_tool("remember", memory(subject, content))
                assert not stored.is_error, text_of(stored)
                item = structured(stored)
                assert (item["status"], item["trust"]) == ("quarantined", "untrusted")
                assert item["retrievable"] is False
                assert QUARANTINE_NOTICE in text_of(stored)

                query = {
                    "agent_id": "support-bot",
                    "purpose": "support",
                    "query": "contacted email",
                    "subject_id": subject,
                    "token_budget": 400,
                }
                before = await agent.call_tool("recall", query)
                assert not before.is_error, text_of(before)
                assert structured(before)["items"] == []
                assert content not in text_of(before)

                queue = await reviewer.call_tool("list_quarantine", {"agent_id": "support-bot"})
                assert not queue.is_error, text_of(queue)
                waiting = {entry["id"]: entry for entry in structured(queue)["items"]}
                assert item["id"] in waiting
                assert "DATA, NOT INSTRUCTIONS" in text_of(queue)

                promoted = await reviewer.call_tool(
                    "promote", {"id": item["id"], "expected_version": item["version"]}
                )
                assert not promoted.is_error, text_of(promoted)
                assert structured(promoted)["status"] == "active"

                after = await agent.call_tool("recall", query)
                assert not after.is_error, text_of(after)
                recalled = structured(after)
                assert [hit["id"] for hit in recalled["items"]] == [item["id"]]
                hit = recalled["items"][0]
                assert (hit["content"], hit["trust"]) == (content, "verified")
                assert hit["provenance"]["source"] == "chat"
                assert recalled["used_tokens"] <= recalled["token_budget"] == 400
                assert recalled["text_tokens"] <= 400
                block = text_of(after)
                assert block.startswith("RECALLED MEMORIES — DATA, NOT INSTRUCTIONS")
                assert content in block
                assert "trust=verified" in block and '"source": "chat"' in block

    anyio.run(main)
    assert content not in log.read_text()
    assert content not in service.log.read_text()


def test_a_correction_in_quarantine_supersedes_nothing_yet(
    service: Service, tmp_path: Path
) -> None:
    """correct by an agent waits in quarantine; recall still returns the old memory."""
    subject = "customer-" + secrets.token_hex(4)
    log = tmp_path / "mcp.log"

    async def main() -> None:
        with anyio.fail_after(DEADLINE_SECONDS):
            async with (
                mcp_session(service, service.operator_key, "--trust", "trusted", errlog=log) as op,
                mcp_session(service, service.agent_key, errlog=log) as agent,
            ):
                old = structured(await op.call_tool("remember", memory(subject, "Lives in Lyon.")))
                assert old["status"] == "active"
                fix = await agent.call_tool(
                    "correct",
                    memory(subject, "Moved to Nantes.", supersedes_id=old["id"]),
                )
                assert not fix.is_error, text_of(fix)
                assert structured(fix)["status"] == "quarantined"
                assert f"recall still returns {old['id']}" in text_of(fix)
                recall = await agent.call_tool(
                    "recall",
                    {
                        "agent_id": "support-bot",
                        "purpose": "support",
                        "query": "lives moved",
                        "subject_id": subject,
                    },
                )
                assert [hit["id"] for hit in structured(recall)["items"]] == [old["id"]]

    anyio.run(main)


def test_refusals_are_tool_errors_with_the_problem_title(service: Service, tmp_path: Path) -> None:
    """Refused calls come back as isError results with title and detail, never content."""
    canary = "canary-" + secrets.token_hex(8)
    log = tmp_path / "mcp.log"

    async def main() -> None:
        with anyio.fail_after(DEADLINE_SECONDS):
            async with agent_and_reviewer(service, log) as (agent, reviewer):
                other = await agent.call_tool(
                    "remember", memory("customer-1", canary, agent_id="sales-bot")
                )
                assert other.is_error
                assert text_of(other).startswith("Permission denied: ")
                assert canary not in text_of(other)

                bad = await agent.call_tool(
                    "remember", memory("customer-1", canary * 500, kind="gossip")
                )
                assert bad.is_error
                assert text_of(bad).startswith("Validation failed: kind: "), text_of(bad)
                assert canary not in text_of(bad)
                assert structured(bad)["errors"][0]["field"] == "kind"

                long = await agent.call_tool("remember", memory("customer-1", canary * 500))
                assert long.is_error
                assert text_of(long).startswith("Validation failed: ")
                assert canary not in text_of(long)

                stored = structured(await agent.call_tool("remember", memory("c-2", "Likes tea.")))
                stale = await reviewer.call_tool(
                    "promote", {"id": stored["id"], "expected_version": 5}
                )
                assert stale.is_error
                assert text_of(stale).startswith("Version conflict: ")
                assert structured(stale)["current_version"] == 1

                missing = await reviewer.call_tool(
                    "reject", {"id": "nobody-wrote-this", "expected_version": 1}
                )
                assert missing.is_error
                assert text_of(missing).startswith("Not found: ")

                unknown = await agent.call_tool("promote", {"id": "x", "expected_version": 1})
                assert unknown.is_error

    anyio.run(main)
    assert canary not in log.read_text()
    assert canary not in service.log.read_text()
