"""gmem: serve the HTTP API, manage API keys, and look after a store.

Every command reads the GMEM_* settings from the environment (and from a settings file
named by --config or GMEM_CONFIG_FILE); its flags mirror them and win over them. Every
store command accepts --data-dir and --database-url. An error ends the command with a
non-zero status and one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from typing import TextIO

from governed_memory.cli import notes, parser
from governed_memory.cli.commands import CommandError
from governed_memory.errors import GovernedMemoryError


def build_parser() -> argparse.ArgumentParser:
    """The ``gmem`` parser with every command."""
    return parser.build_parser(__doc__)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run ``gmem``; return the exit status."""
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    notes.attach()
    try:
        return _run(args, out)
    finally:
        notes.detach()


def _run(args: argparse.Namespace, out: TextIO) -> int:
    try:
        status: int = args.run(args, out)
    except GovernedMemoryError as error:  # ConfigError included
        return _fail(error.detail)
    except CommandError as error:
        return _fail(str(error))
    except BrokenPipeError:
        # The reader stopped reading (gmem keys list | head): end quietly with the status
        # of a process that SIGPIPE ends, as a pipeline's tools do.
        _detach_stdout()
        return 128 + signal.SIGPIPE
    except OSError as error:
        where = f": {error.filename}" if error.filename else ""
        return _fail(f"{error.strerror or type(error).__name__}{where}")
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # noqa: BLE001 - one line, never a traceback quoting input
        return _fail(f"unexpected {type(error).__name__}")
    return status


def _detach_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit cannot fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (embedded, tests): nothing to flush
        pass


def _fail(message: str) -> int:
    print(f"gmem: error: {message}", file=sys.stderr)
    return 1


__all__ = ["build_parser", "main"]
