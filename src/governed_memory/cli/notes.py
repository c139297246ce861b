"""What the library says while a command starts, printed as ``gmem:`` lines on stderr.

Settings warnings (an unknown ``GMEM_*`` name, a junk line in the settings file) and
notes of the composition root (a data directory created for a new store) are log records
of the ``governed_memory.config`` and ``governed_memory.bootstrap`` loggers. A command
shows them as ``gmem: warning: …`` and ``gmem: note: …``; ``gmem serve`` hands them to its
JSON log once that is configured (:func:`detach`).
"""

from __future__ import annotations

import logging
import sys

LOGGERS = ("governed_memory.config", "governed_memory.bootstrap")
_WORDS = {"INFO": "note", "WARNING": "warning"}


class _StderrLines(logging.Handler):
    """One ``gmem: <level>: <message>`` line per record, on the stderr of the moment."""

    def emit(self, record: logging.LogRecord) -> None:
        word = _WORDS.get(record.levelname, record.levelname.lower())
        print(f"gmem: {word}: {record.getMessage()}", file=sys.stderr)


def attach() -> None:
    """Print the start-up loggers' records on stderr (once, however often called)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers[:] = [h for h in logger.handlers if not isinstance(h, _StderrLines)]
        logger.addHandler(_StderrLines())
        logger.setLevel(logging.INFO)
        logger.propagate = False


def detach() -> None:
    """Hand the start-up loggers back to the root logger (``gmem serve``'s JSON lines)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers[:] = [h for h in logger.handlers if not isinstance(h, _StderrLines)]
        logger.setLevel(logging.NOTSET)
        logger.propagate = True


__all__ = ["LOGGERS", "attach", "detach"]
