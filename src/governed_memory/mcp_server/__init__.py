"""``gmem mcp``: governed memory as Model Context Protocol tools, over a gmem service.

The server talks to a running service through :class:`~governed_memory.client.AsyncClient`
with the API key in ``GMEM_API_KEY`` and the URL in ``GMEM_URL``; every rule is enforced by
the service, exactly as for any other caller. It needs the official MCP SDK, the ``mcp``
extra, installed from a checkout (the package is not on PyPI) with
``.venv/bin/pip install -e '.[mcp]'``. See ``docs/mcp.md``.

This module does not import the SDK, so the rest of ``gmem`` works without it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from governed_memory.mcp_server.options import Options, StartupError, add_arguments

#: The install line, as docs/mcp.md shows it: governed-memory is installed from a checkout.
INSTALL_MCP = ".venv/bin/pip install -e '.[mcp]'"
SDK_MISSING = (
    "gmem mcp needs the MCP SDK, the optional mcp extra (governed-memory is not on PyPI): "
    f"from your checkout, run {INSTALL_MCP}"
)
HELP = "Serve the MCP tools (remember, recall, correct; or --reviewer) over a gmem service."


def _fail(message: str) -> int:
    print(f"gmem: error: {message}", file=sys.stderr)
    return 1


def run_command(args: argparse.Namespace, out: TextIO) -> int:
    """Run the MCP server until its transport closes; one line on stderr if it cannot."""
    try:
        options = Options.from_args(args)
    except StartupError as error:
        return _fail(str(error))
    try:  # here, not at the top: the SDK is the optional mcp extra
        import anyio

        from governed_memory.mcp_server import server
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] in {"mcp", "mcp_types"}:
            return _fail(SDK_MISSING)
        raise
    try:
        anyio.run(server.main, options)
    except StartupError as error:
        return _fail(str(error))
    return 0


def add_command(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``gmem mcp`` to the ``gmem`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser("mcp", help=HELP, description=HELP)
    add_arguments(parser)
    parser.set_defaults(run=run_command)
    return parser


__all__ = ["INSTALL_MCP", "SDK_MISSING", "Options", "StartupError", "add_command", "run_command"]
