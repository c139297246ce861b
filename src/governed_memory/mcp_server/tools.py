"""The tools of one MCP server: the agent or the reviewer toolset, behind one dispatcher.

Two toolsets, never mixed in one server (SPEC §8 "MCP tools"): the agent's
(:mod:`~governed_memory.mcp_server.agent_tools`) and the reviewer's
(:mod:`~governed_memory.mcp_server.reviewer_tools`). Every call goes through
:class:`~governed_memory.client.AsyncClient`, so the service enforces every rule exactly
as for any other caller; every failure becomes a tool error without content
(:mod:`~governed_memory.mcp_server.toolkit`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import mcp_types as types
import pydantic

from governed_memory.client import AsyncClient
from governed_memory.core.values import Trust
from governed_memory.errors import GovernedMemoryError
from governed_memory.mcp_server.agent_tools import AgentTools
from governed_memory.mcp_server.reviewer_tools import ReviewerTools
from governed_memory.mcp_server.toolkit import ToolSpec, invalid_arguments, tool_error
from governed_memory.tokens import Tokenizer

log = logging.getLogger("governed_memory.mcp")


class MemoryTools:
    """The tools of one MCP server, over one client and one API key."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        reviewer: bool = False,
        trust: Trust = Trust.UNTRUSTED,
        tokenizer: Callable[[], Tokenizer] | None = None,
    ) -> None:
        self.client = client
        self.trust = trust
        toolset = ReviewerTools(client) if reviewer else AgentTools(client, trust, tokenizer)
        self.specs = {spec.name: spec for spec in toolset.specs()}

    def definitions(self) -> list[types.Tool]:
        return [spec.definition() for spec in self.specs.values()]

    async def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        """Run one tool; every failure becomes a tool error without content."""
        spec = self.specs.get(name)
        if spec is None:
            known = ", ".join(self.specs)
            return tool_error(
                GovernedMemoryError(f"unknown tool {name!r}; this server has {known}")
            )
        try:
            args = spec.args.model_validate(arguments or {})
        except pydantic.ValidationError as error:
            return invalid_arguments(error)
        try:
            return await spec.handler(args)
        except GovernedMemoryError as error:
            log.info("tool refused", extra={"tool": name, "error_type": type(error).__name__})
            return tool_error(error)
        except Exception as error:  # noqa: BLE001 - reported by class only, never by text
            log.error("tool failed", extra={"tool": name, "error_type": type(error).__name__})
            return tool_error(GovernedMemoryError(f"the tool failed ({type(error).__name__})"))


__all__ = ["MemoryTools", "ToolSpec", "tool_error"]
