"""The MCP tools in process: the SDK's in-memory client, the real app, no subprocess."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp
import mcp_types as types

from governed_memory import AsyncClient, GovernedMemoryError, Trust
from governed_memory.client import RetryPolicy
from governed_memory.mcp_server.server import build_server
from governed_memory.mcp_server.tools import MemoryTools
from governed_memory.tokens import EstimateTokenizer
from tests.mcp_server.conftest import structured, text_of
from tests.support.api import Served

Body = Callable[[mcp.Client], Awaitable[Any]]


def with_tools(served: Served, key: str, body: Body, **options: Any) -> Any:
    """Run ``body`` with an MCP client connected in process to the tools over ``served``."""

    async def main() -> Any:
        with anyio.fail_after(30):
            async with AsyncClient(served.url, key, retry=RetryPolicy(attempts=1)) as http:
                tools = MemoryTools(http, tokenizer=EstimateTokenizer, **options)
                server = build_server(tools, reviewer=options.get("reviewer", False))
                async with mcp.Client(server) as client:
                    return await body(client)

    return anyio.run(main)


def note(content: str = "Prefers email over phone.", **overrides: Any) -> dict[str, Any]:
    """remember's arguments for support-bot's support memory about customer-1."""
    return {
        "agent_id": "support-bot",
        "subject_id": "customer-1",
        "purpose": "support",
        "kind": "fact",
        "content": content,
        "provenance": {"source": "crm", "ref": "ticket-1", "version": "v2"},
    } | overrides


def test_trusted_writes_are_active_at_once(served: Served) -> None:
    """With trust=trusted and a trusted key, remember stores an active, recallable memory."""

    async def body(client: mcp.Client) -> None:
        stored = await client.call_tool("remember", note())
        assert structured(stored)["status"] == "active"
        assert "recall can return it now" in text_of(stored)
        recalled = await client.call_tool(
            "recall", {"agent_id": "support-bot", "purpose": "support", "query": "email"}
        )
        assert [hit["id"] for hit in structured(recalled)["items"]] == [structured(stored)["id"]]

    with_tools(served, served.key(trust="trusted"), body, trust=Trust.TRUSTED)


def test_an_active_correction_supersedes_at_once(served: Served) -> None:
    """A trusted correction supersedes the old memory; recall returns only the new one."""

    async def body(client: mcp.Client) -> None:
        old = structured(await client.call_tool("remember", note("Lives in Lyon.")))
        fixed = await client.call_tool("correct", note("Moved to Nantes.", supersedes_id=old["id"]))
        assert f"{old['id']} is superseded and kept in history" in text_of(fixed)
        recalled = await client.call_tool(
            "recall", {"agent_id": "support-bot", "purpose": "support", "query": "lyon nantes"}
        )
        assert [hit["id"] for hit in structured(recalled)["items"]] == [structured(fixed)["id"]]

    with_tools(served, served.key(trust="trusted"), body, trust=Trust.TRUSTED)


def test_recall_fits_the_whole_block_in_the_budget(served: Served) -> None:
    """The text block, frame included, fits token_budget; what does not fit is counted."""
    writer = served.client(served.key())
    for n in range(5):
        writer.create(
            agent_id="support-bot",
            subject_id="customer-1",
            purpose="support",
            kind="fact",
            content=f"Email note {n}: " + "words about email " * 10,
            provenance={"source": "crm", "ref": f"t-{n}"},
            trust="trusted",
        )
    tokenizer = EstimateTokenizer()

    async def body(client: mcp.Client) -> None:
        for budget in (60, 200, 400, 2000):
            recalled = await client.call_tool(
                "recall",
                {
                    "agent_id": "support-bot",
                    "purpose": "support",
                    "query": "email",
                    "token_budget": budget,
                },
            )
            result = structured(recalled)
            assert tokenizer.count(text_of(recalled)) == result["text_tokens"]
            if result["items"]:
                assert result["text_tokens"] <= budget
            assert len(result["items"]) + result["skipped"] == 5

    with_tools(served, served.key(), body)


def test_the_review_queue_pages_and_reject_refuses(served: Served) -> None:
    """list_quarantine pages with a cursor; reject takes a reason and refuses the memory."""
    writer = served.client(served.key("memory:write", trust="untrusted"))
    ids = [
        writer.create(
            agent_id="support-bot",
            subject_id="customer-1",
            purpose="support",
            kind="fact",
            content=f"Unverified claim {n}.",
            provenance={"source": "chat", "ref": "c-1"},
        ).item.id
        for n in range(3)
    ]

    async def body(client: mcp.Client) -> None:
        first = structured(await client.call_tool("list_quarantine", {"limit": 2}))
        assert [item["id"] for item in first["items"]] == ids[:2]
        rest = await client.call_tool(
            "list_quarantine", {"limit": 2, "cursor": first["next_cursor"]}
        )
        assert [item["id"] for item in structured(rest)["items"]] == ids[2:]
        assert "End of the queue." in text_of(rest)
        rejected = await client.call_tool(
            "reject", {"id": ids[0], "expected_version": 1, "reason": "no source"}
        )
        assert structured(rejected)["status"] == "rejected"
        again = await client.call_tool("reject", {"id": ids[0], "expected_version": 1})
        assert again.is_error
        assert text_of(again).startswith(("Invalid status transition: ", "Version conflict: "))

    with_tools(served, served.key("memory:review"), body, reviewer=True)


def test_an_unknown_tool_is_a_tool_error(served: Served) -> None:
    """Calling a tool the toolset does not have is an isError result naming the tools."""

    async def body(client: mcp.Client) -> types.CallToolResult:
        return await client.call_tool("forget_subject", {"subject_id": "customer-1"})

    result = with_tools(served, served.key(), body)
    assert result.is_error
    assert "remember, recall, correct" in text_of(result)


def test_an_unexpected_failure_says_nothing_of_itself(served: Served) -> None:
    """A crash inside a tool becomes a generic tool error naming only its class."""

    class Exploding(EstimateTokenizer):
        def count(self, text: str) -> int:
            raise RuntimeError(text)

    async def body(client: mcp.Client) -> types.CallToolResult:
        await client.call_tool("remember", note("Secret-ish content."))
        return await client.call_tool(
            "recall", {"agent_id": "support-bot", "purpose": "support", "query": "content"}
        )

    async def main() -> types.CallToolResult:
        async with AsyncClient(served.url, served.key()) as http:
            tools = MemoryTools(http, trust=Trust.TRUSTED, tokenizer=Exploding)
            async with mcp.Client(build_server(tools, reviewer=False)) as client:
                return await body(client)

    result = anyio.run(main)
    assert result.is_error
    assert text_of(result) == "Internal server error: the tool failed (RuntimeError)"
    assert GovernedMemoryError.title in text_of(result)


def test_tool_schemas_are_self_contained(served: Served) -> None:
    """Every input schema is inline (no $ref for hosts that cannot resolve one) and described."""

    async def body(client: mcp.Client) -> list[types.Tool]:
        return (await client.list_tools()).tools

    tools = with_tools(served, served.key(), body) + with_tools(
        served, served.key(), body, reviewer=True
    )
    for tool in tools:
        assert "$ref" not in json.dumps(tool.input_schema), tool.name
        assert tool.input_schema.get("additionalProperties") is False, tool.name
        for name, field in tool.input_schema["properties"].items():
            assert field.get("description"), (tool.name, name)
    remember = next(tool for tool in tools if tool.name == "remember")
    provenance = remember.input_schema["properties"]["provenance"]
    assert provenance["required"] == ["source", "ref"]
    assert provenance["description"].startswith("Where the statement came from")
