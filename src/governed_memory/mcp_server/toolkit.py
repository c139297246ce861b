"""What every MCP tool is made of: its spec, its published schema, its results and errors.

A refused call becomes a tool error (``isError``) whose text is the problem's title and
detail — ids, versions, and for bad input each field with its rule, never memory content
— and whose structured content carries the same members as the HTTP problem. A successful
call's structured content follows the tool's declared output schema
(:mod:`~governed_memory.mcp_server.outputs`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import pydantic

from governed_memory.errors import (
    FieldError,
    GovernedMemoryError,
    InvalidTransition,
    RateLimited,
    ValidationError,
    VersionConflict,
)
from governed_memory.mcp_server.arguments import Args
from governed_memory.mcp_server.outputs import Output

Handler = Callable[[Any], Awaitable[types.CallToolResult]]

#: Fields named, with their rules, in the text of one tool error.
MAX_FIELDS_IN_TEXT = 10

#: Hints of a tool that writes something new each call.
WRITES = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)
#: Hints of a tool that only reads this service.
READS = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool: its name, description, argument model, hints and handler."""

    name: str
    title: str
    description: str
    args: type[Args]
    annotations: types.ToolAnnotations
    handler: Handler
    output: type[Output]

    def definition(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=inline_refs(self.args.model_json_schema()),
            output_schema=inline_refs(self.output.model_json_schema(mode="serialization")),
            annotations=self.annotations,
        )


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with its ``$defs`` written in place: not every MCP host resolves ``$ref``."""
    definitions = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = definitions[str(node["$ref"]).rsplit("/", 1)[-1]]
                extra = {key: value for key, value in node.items() if key != "$ref"}
                return walk(target) | {key: walk(value) for key, value in extra.items()}
            return {key: walk(value) for key, value in node.items() if key != "$defs"}
        if isinstance(node, list):
            return [walk(value) for value in node]
        return node

    inlined: dict[str, Any] = walk(schema)
    return inlined


def result(text: str, structured: Output) -> types.CallToolResult:
    """A successful call: text for the model, the same facts structured for the host."""
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured.dump()
    )


def tool_error(error: GovernedMemoryError) -> types.CallToolResult:
    """A refused call as a tool error: the problem's title and detail, never content."""
    problem: dict[str, Any] = {
        "title": error.title,
        "detail": error.detail,
        "error": type(error).__name__,
    }
    if isinstance(error, ValidationError):
        problem["errors"] = [{"field": e.field, "message": e.message} for e in error.errors]
    if isinstance(error, VersionConflict | InvalidTransition):
        problem["current_version"] = error.current_version
    if isinstance(error, RateLimited):
        problem["retry_after"] = error.retry_after
    return types.CallToolResult(
        content=[types.TextContent(text=f"{error.title}: {_reason(error)}")],
        structured_content=problem,
        is_error=True,
    )


def _reason(error: GovernedMemoryError) -> str:
    """The text an agent reads: for bad input, each field with its rule (the service's
    detail names only the fields), never a value."""
    if not isinstance(error, ValidationError):
        return error.detail
    named = [e for e in error.errors if e.field]
    if not named:
        return error.detail
    shown = "; ".join(f"{e.field}: {e.message}" for e in named[:MAX_FIELDS_IN_TEXT])
    more = len(named) - MAX_FIELDS_IN_TEXT
    return shown + (f"; and {more} more" if more > 0 else "")


def invalid_arguments(error: pydantic.ValidationError) -> types.CallToolResult:
    """Arguments the schema refuses: field names and rules, never the values given."""
    fields = [
        FieldError(".".join(str(part) for part in e["loc"]) or "arguments", e["msg"])
        for e in error.errors(include_input=False, include_url=False, include_context=False)
    ]
    detail = "; ".join(f"{f.field}: {f.message}" for f in fields)
    return tool_error(ValidationError(f"invalid arguments: {detail}", fields))


__all__ = [
    "READS",
    "WRITES",
    "Handler",
    "ToolSpec",
    "inline_refs",
    "invalid_arguments",
    "result",
    "tool_error",
]
