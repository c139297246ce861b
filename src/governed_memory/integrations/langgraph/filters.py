"""LangGraph's filters and namespace patterns, evaluated on values the service returned.

They run after the service's hard filters (tenant, agent, purpose, status, expiry and, if
the namespace fixes it, subject), on decrypted values inside the process: a filter is
plain Python, so no filter key or value ever reaches a query language.

Semantics are those of LangGraph's own stores: a filter member matches when the value
at its key (or dotted path, ``"user.name"``) equals it — lists element by element,
objects member by member — or satisfies every operator it gives (``$eq``, ``$ne``,
``$gt``, ``$gte``, ``$lt``, ``$lte``; the ordering ones compare as numbers).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from governed_memory.integrations.langgraph.mapping import WILDCARD

_MISSING = object()

ORDERINGS: dict[str, Callable[[float, float], bool]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


def matches(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` passes every member of a LangGraph filter."""
    return all(_equal(lookup(value, key), wanted) for key, wanted in (conditions or {}).items())


def lookup(value: Mapping[str, Any], key: str) -> Any:
    """The member ``key`` of ``value``, or else the dotted path ``key`` names."""
    if key in value:
        return value[key]
    found: Any = value
    for part in key.split("."):
        if not isinstance(found, Mapping) or part not in found:
            return _MISSING
        found = found[part]
    return found


def _equal(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply(found, op, operand) for op, operand in wanted.items())
        return isinstance(found, Mapping) and all(
            _equal(found.get(k, _MISSING), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(found, list | tuple)
            and len(found) == len(wanted)
            and all(_equal(f, w) for f, w in zip(found, wanted, strict=True))
        )
    return found is not _MISSING and found == wanted


def _apply(found: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return found is not _MISSING and found == operand
    if op == "$ne":
        return found is _MISSING or found != operand
    compare = ORDERINGS.get(op)
    if compare is None:
        raise ValueError(f"unsupported filter operator {op!r}")
    if isinstance(found, bool) or not isinstance(found, int | float):
        return False
    return compare(float(found), float(operand))


def namespace_matches(namespace: Sequence[str], kind: str, pattern: Sequence[str]) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with ``pattern``,
    whose ``"*"`` labels match any one label."""
    if len(namespace) < len(pattern):
        return False
    if kind == "prefix":
        pairs = zip(namespace, pattern, strict=False)
    elif kind == "suffix":
        pairs = zip(reversed(namespace), reversed(pattern), strict=False)
    else:
        raise ValueError(f"unsupported match type {kind!r}")
    return all(p == WILDCARD or n == p for n, p in pairs)
