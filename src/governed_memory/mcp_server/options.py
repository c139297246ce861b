"""What ``gmem mcp`` serves and where it connects: from flags, else ``GMEM_*`` variables.

This module does not import the MCP SDK, so ``gmem mcp --help`` works without it.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from governed_memory.client import API_KEY_VARIABLE, DEFAULT_URL, URL_VARIABLE
from governed_memory.core.values import Trust

TRUST_VARIABLE = "GMEM_MCP_TRUST"
HOST_VARIABLE = "GMEM_MCP_HOST"
PORT_VARIABLE = "GMEM_MCP_PORT"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8081


class StartupError(Exception):
    """The server cannot start as configured; the message is the one line to print."""


@dataclass(frozen=True, slots=True)
class Options:
    """The resolved configuration of one MCP server."""

    url: str
    api_key: str
    reviewer: bool
    trust: Trust
    http: bool
    host: str
    port: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        """Flags win over variables; a missing key or a bad value is a :class:`StartupError`."""
        api_key = args.api_key or os.environ.get(API_KEY_VARIABLE)
        if not api_key:
            raise StartupError(
                f"set {API_KEY_VARIABLE} to the API key the MCP tools act with (or --api-key)"
            )
        trust_name = args.trust or os.environ.get(TRUST_VARIABLE) or Trust.UNTRUSTED.value
        if trust_name not in (Trust.UNTRUSTED.value, Trust.TRUSTED.value):
            raise StartupError(f"{TRUST_VARIABLE} / --trust must be untrusted or trusted")
        port_text = str(args.port or os.environ.get(PORT_VARIABLE) or DEFAULT_PORT)
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65_535:
            raise StartupError(f"{PORT_VARIABLE} / --port must be a port number (1..65535)")
        return cls(
            url=args.url or os.environ.get(URL_VARIABLE) or DEFAULT_URL,
            api_key=api_key,
            reviewer=bool(args.reviewer),
            trust=Trust(trust_name),
            http=bool(args.http),
            host=args.host or os.environ.get(HOST_VARIABLE) or DEFAULT_HOST,
            port=int(port_text),
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``gmem mcp``."""
    parser.add_argument(
        "--url", help=f"the gmem service's base URL ({URL_VARIABLE}, default: {DEFAULT_URL})"
    )
    parser.add_argument(
        "--api-key",
        help=f"the API key the tools act with ({API_KEY_VARIABLE}; prefer the variable: "
        "command lines are visible to other users of the machine)",
    )
    parser.add_argument(
        "--reviewer",
        action="store_true",
        help="serve the reviewer toolset (list_quarantine, promote, reject) instead of the "
        "agent toolset; the key needs memory:review",
    )
    parser.add_argument(
        "--trust",
        choices=[Trust.UNTRUSTED.value, Trust.TRUSTED.value],
        help=f"the trust remember and correct claim ({TRUST_VARIABLE}, default: untrusted, "
        "so memories wait in quarantine); trusted needs a key whose max trust is trusted",
    )
    parser.add_argument(
        "--http",
        action="store_true",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio",
    )
    parser.add_argument(
        "--host", help=f"with --http: where to listen ({HOST_VARIABLE}, default: {DEFAULT_HOST})"
    )
    parser.add_argument(
        "--port",
        help=f"with --http: the port to listen on ({PORT_VARIABLE}, default: {DEFAULT_PORT})",
    )


__all__ = ["Options", "StartupError", "add_arguments"]
