"""Rendering the console's pages: the Jinja2 templates, the security headers, the views.

Templates escape everything they print (autoescape on every template), so memory content,
reasons and ids appear as text, never as markup. Every page goes out with a strict
Content-Security-Policy (nothing but this origin's stylesheet and images; no script at
all), ``X-Frame-Options: DENY``, ``no-store`` caching and no referrer.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.responses import HTMLResponse

from governed_memory.core.values import rfc3339
from governed_memory.errors import GovernedMemoryError, ValidationError
from governed_memory.http.problems import INTERNAL, problem_type

log = logging.getLogger("governed_memory.console")

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

_environment = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _when(value: datetime | None) -> str:
    """A time as people read it: ``2026-12-02 09:00:00 UTC``."""
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _machine_time(value: datetime | None) -> str:
    """A time as a ``<time datetime>`` attribute wants it (RFC 3339)."""
    return "" if value is None else rfc3339(value)


_environment.filters["when"] = _when
_environment.filters["rfc3339"] = _machine_time


def render(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """The page ``template`` filled with ``context``, with the console's headers."""
    html = _environment.get_template(template).render(**context)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


@dataclass(frozen=True, slots=True)
class Problem:
    """A refusal as a page shows it: the problem's status, title and detail."""

    status: int
    title: str
    detail: str
    fields: tuple[str, ...] = ()


def problem_of(error: GovernedMemoryError) -> Problem:
    """The problem the API would answer for ``error`` (never more than its detail says)."""
    kind = problem_type(error)
    if kind is INTERNAL:  # as the API: nothing of an unexpected error is shown
        log.error("internal error", extra={"error_type": type(error).__name__})
        return Problem(kind.status, kind.title, "an unexpected error occurred")
    fields: tuple[str, ...] = ()
    if isinstance(error, ValidationError):
        fields = tuple(f"{e.field}: {e.message}" for e in error.errors)
    return Problem(kind.status, kind.title, error.detail, fields)


def age(then: datetime, now: datetime) -> str:
    """How long ago ``then`` was, coarsely: ``3 min``, ``5 h``, ``2 d``."""
    seconds = max(0, int((now - then) / timedelta(seconds=1)))
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


_WORDS = re.compile(r"\s+|\S+")


@dataclass(frozen=True, slots=True)
class Piece:
    """One run of a word diff: ``same``, ``removed`` or ``added`` text."""

    change: str
    text: str


def word_diff(old: str | None, new: str | None) -> list[Piece]:
    """The word-by-word changes from ``old`` to ``new`` (whitespace kept)."""
    before, after = _WORDS.findall(old or ""), _WORDS.findall(new or "")
    pieces: list[Piece] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pieces.append(Piece("same", "".join(before[i1:i2])))
            continue
        if i2 > i1:
            pieces.append(Piece("removed", "".join(before[i1:i2])))
        if j2 > j1:
            pieces.append(Piece("added", "".join(after[j1:j2])))
    return pieces


def query_string(values: Mapping[str, str | None]) -> str:
    """``?a=1&b=2`` of the values set (for links that keep a page's filters)."""
    kept = {name: value for name, value in values.items() if value}
    return "?" + urlencode(kept) if kept else ""


__all__ = [
    "CONTENT_SECURITY_POLICY",
    "SECURITY_HEADERS",
    "STATIC",
    "Piece",
    "Problem",
    "age",
    "problem_of",
    "query_string",
    "render",
    "word_diff",
]
