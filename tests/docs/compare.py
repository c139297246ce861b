"""A sample shown in the docs against what the example printed.

The rules, the same for every page:

- ``…`` (U+2026) is an ellipsis. A JSON string that is only ``…`` matches any value; a
  member ``"…": "…"`` lets the printed object have more members than the sample shows
  (without it, both have the same members); a ``"…"`` element of an array matches any run
  of elements. Inside a string or a line of text, ``…`` matches any characters.
- Volatile values are normalised on both sides before they are compared: RFC 3339 times
  (``<time>``), dates (``<date>``), UUIDs (``<uuid>``) and runs of 8 or more lowercase hex
  digits (``<hex>``: key ids, hashes, fence tags). So a sample may show any such value.
- Numbers are compared as numbers: integers exactly, except log positions (``position``,
  ``next_after``), which depend on what earlier examples wrote; floats within 0.01, except
  the rank score and its lexical part (``score``, ``lexical``), which follow the ranking
  of the day — for those, only that a number is there.
- Text is compared line by line, trailing spaces and trailing blank lines ignored.
"""

from __future__ import annotations

import json
import re
from typing import Any

ELLIPSIS = "…"
VOLATILE = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"), "<time>"),
    (re.compile(r"\d{4}-\d\d-\d\d"), "<date>"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{8,}(?![0-9A-Za-z])"), "<hex>"),
]
ANY_INTEGER = {"position", "next_after"}
ANY_NUMBER = {"score", "lexical"}
TOLERANCE = 0.01


def normal(text: str) -> str:
    for pattern, name in VOLATILE:
        text = pattern.sub(name, text)
    return text


def same_text(sample: str, printed: str) -> bool:
    """One string of the sample (with ``…`` as a wildcard) against a printed one."""
    pattern = ".*".join(re.escape(part) for part in normal(sample).split(ELLIPSIS))
    return re.fullmatch(pattern, normal(printed), re.DOTALL) is not None


def differences(info: str, sample: str, printed: str) -> list[str]:
    """What differs between a sample block and what its example printed (empty: same)."""
    if info == "json":
        try:
            shown = json.loads(sample)
        except json.JSONDecodeError as error:
            return [f"the sample is not JSON: {error}"]
        try:
            got = json.loads(printed)
        except json.JSONDecodeError:
            return [f"the example printed no JSON: {printed[:300]!r}"]
        return _json("$", shown, got, None)
    return _lines(sample, printed)


def _lines(sample: str, printed: str) -> list[str]:
    shown = [line.rstrip() for line in sample.rstrip().splitlines()]
    got = [line.rstrip() for line in printed.rstrip().splitlines()]
    if len(shown) != len(got):
        return [f"the sample has {len(shown)} lines, the example printed {len(got)}:\n{printed}"]
    return [
        f"line {n}: shown {a!r}, printed {b!r}"
        for n, (a, b) in enumerate(zip(shown, got, strict=True), start=1)
        if not same_text(a, b)
    ]


def _json(where: str, shown: Any, got: Any, key: str | None) -> list[str]:
    if shown == ELLIPSIS:
        return []
    if isinstance(shown, dict):
        return _object(where, shown, got)
    if isinstance(shown, list):
        if isinstance(got, list) and ELLIPSIS not in shown and len(got) == len(shown):
            pairs = zip(shown, got, strict=True)
            return [d for n, (a, b) in enumerate(pairs) for d in _json(f"{where}[{n}]", a, b, None)]
        if not isinstance(got, list) or not _array(where, shown, got):
            return [f"{where}: shown {json.dumps(shown)[:200]}, printed {json.dumps(got)[:200]}"]
        return []
    if isinstance(shown, str):
        ok = isinstance(got, str) and same_text(shown, got)
    elif isinstance(shown, bool) or shown is None:
        ok = shown is got
    elif isinstance(shown, int | float):
        ok = _number(shown, got, key)
    else:  # pragma: no cover - json.loads makes nothing else
        ok = False
    return [] if ok else [f"{where}: shown {shown!r}, printed {got!r}"]


def _object(where: str, shown: dict[str, Any], got: Any) -> list[str]:
    if not isinstance(got, dict):
        return [f"{where}: shown an object, printed {got!r}"]
    found: list[str] = []
    if ELLIPSIS not in shown and set(got) - set(shown):
        found.append(
            f"{where}: printed members the sample does not show: {sorted(set(got) - set(shown))}"
        )
    for name, value in shown.items():
        if name == ELLIPSIS:
            continue
        if name not in got:
            found.append(f"{where}.{name}: shown, not printed")
        else:
            found.extend(_json(f"{where}.{name}", value, got[name], name))
    return found


def _array(where: str, shown: list[Any], got: list[Any]) -> bool:
    """Whether ``got`` matches ``shown``, whose ``"…"`` elements match any run."""
    if not shown:
        return not got
    head, rest = shown[0], shown[1:]
    if head == ELLIPSIS:
        return any(_array(where, rest, got[skip:]) for skip in range(len(got) + 1))
    return bool(got) and not _json(where, head, got[0], None) and _array(where, rest, got[1:])


def _number(shown: float, got: Any, key: str | None) -> bool:
    if isinstance(got, bool) or not isinstance(got, int | float):
        return False
    if key in ANY_NUMBER:
        return True
    if key in ANY_INTEGER:
        return isinstance(got, int) and got >= 0
    if isinstance(shown, int) and isinstance(got, int):
        return shown == got
    return abs(shown - got) <= TOLERANCE


__all__ = ["differences", "normal", "same_text"]
