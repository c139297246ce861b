"""The tools' results as a host sees them through the official client: declared output
schemas that every result follows, and refusals whose text says what to fix."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
from mcp import ClientSession

from tests.mcp_server.conftest import (
    DEADLINE_SECONDS,
    Service,
    agent_and_reviewer,
    structured,
    text_of,
)
from tests.mcp_server.test_stdio import memory


async def schemas(session: ClientSession) -> dict[str, dict[str, Any]]:
    """Each tool's declared output schema, by tool name."""
    tools = (await session.list_tools()).tools
    declared = {tool.name: tool.output_schema for tool in tools}
    assert all(isinstance(schema, dict) for schema in declared.values()), declared
    return {name: schema for name, schema in declared.items() if schema is not None}


def follows(result: types.CallToolResult, schema: dict[str, Any]) -> dict[str, Any]:
    """The result's structured content, checked against ``schema``."""
    assert not result.is_error, text_of(result)
    content = structured(result)
    jsonschema.validate(content, schema)
    return content


def test_every_tool_declares_its_output_and_every_result_follows_it(
    service: Service, tmp_path: Path
) -> None:
    """Both toolsets declare an output schema per tool; remember, recall, list_quarantine
    and promote return structured content that the schema accepts."""

    async def main() -> None:
        with anyio.fail_after(DEADLINE_SECONDS):
            async with agent_and_reviewer(service, tmp_path / "mcp.log") as (agent, reviewer):
                of_agent, of_reviewer = await schemas(agent), await schemas(reviewer)
                assert set(of_agent) == {"remember", "recall", "correct"}
                assert set(of_reviewer) == {"list_quarantine", "promote", "reject"}
                subject = "customer-" + secrets.token_hex(4)
                stored = follows(
                    await agent.call_tool("remember", memory(subject, "Prefers tea.")),
                    of_agent["remember"],
                )
                queue = follows(
                    await reviewer.call_tool("list_quarantine", {"limit": 500}),
                    of_reviewer["list_quarantine"],
                )
                waiting = next(item for item in queue["items"] if item["id"] == stored["id"])
                follows(
                    await reviewer.call_tool(
                        "promote", {"id": waiting["id"], "expected_version": waiting["version"]}
                    ),
                    of_reviewer["promote"],
                )
                query = {"agent_id": "support-bot", "purpose": "support", "query": "tea"}
                recalled = follows(
                    await agent.call_tool("recall", query | {"subject_id": subject}),
                    of_agent["recall"],
                )
                assert [item["id"] for item in recalled["items"]] == [stored["id"]]

    anyio.run(main)


def test_a_refusal_of_the_service_names_each_field_with_its_rule(
    service: Service, tmp_path: Path
) -> None:
    """Content the service refuses (blank) gives a tool error whose text, what the agent
    reads, names the field and the rule — never the content."""

    async def main() -> None:
        with anyio.fail_after(DEADLINE_SECONDS):
            async with agent_and_reviewer(service, tmp_path / "mcp.log") as (agent, _):
                blank = await agent.call_tool("remember", memory("customer-9", " \t "))
                assert blank.is_error
                assert text_of(blank) == (
                    "Validation failed: content: must have at least 1 non-blank character"
                )
                canary = "canary-" + secrets.token_hex(8)
                long = await agent.call_tool("remember", memory("customer-9", canary * 600))
                assert long.is_error
                assert text_of(long).startswith("Validation failed: content: ")
                assert canary not in text_of(long)

    anyio.run(main)
