"""The impact of a posting: the key that lists a term's postings best first, and its bound.

BM25's term part of an item is ``idf × (k1 + 1) × g(tf, length)`` with
``g = tf / (tf + k1 × (1 − b + b × length / average))``: it grows with ``tf`` and falls with
``length``, whatever the scope's average length. A posting's impact is
``tf << 16 | (65535 − length)``, so ordering a term's postings by impact, largest first,
lists them by ``tf`` descending, then ``length`` ascending. That is not exactly the order of
``g`` (a short item with one occurrence can beat a long one with two), but it bounds every
posting after a given one exactly: it has a smaller ``tf`` (any length ≥ 1), or the same
``tf`` and a length at least as large (:func:`remaining_bound`). With b = 0.3 and memories'
lengths, ``tf`` dominates, so the order is nearly the order of ``g``.

Content is at most 8,000 characters, so ``tf`` and ``length`` both fit 16 bits and are
recovered from the impact alone (:func:`tf_of`, :func:`length_of`).
"""

from __future__ import annotations

import math
from typing import Any

from governed_memory.core.model import ItemState
from governed_memory.core.retrieval import K1, B
from governed_memory.core.values import to_micros
from governed_memory.records import IndexDoc

_LENGTH_BITS = 16
_LENGTH_MASK = (1 << _LENGTH_BITS) - 1


def impact(tf: int, length: int) -> int:
    """The posting's ordering key: larger for a larger ``tf``, then a shorter item."""
    if not (1 <= tf <= _LENGTH_MASK and 0 <= length <= _LENGTH_MASK):
        raise ValueError(f"a posting's tf {tf} or length {length} is out of range")
    return (tf << _LENGTH_BITS) | (_LENGTH_MASK - length)


def impact_rows(rowid: int, scope: int, index: IndexDoc) -> list[tuple[int, int, int, int]]:
    """An item's postings: (scope, term, impact, item) for each of its terms."""
    length = index.length
    if not 0 <= length <= _LENGTH_MASK:  # every tf is at most the length
        raise ValueError(f"an item's length {length} is out of range")
    low = _LENGTH_MASK - length
    return [(scope, term, (tf << _LENGTH_BITS) | low, rowid) for term, tf in index.terms.items()]


def tf_of(value: int) -> int:
    return value >> _LENGTH_BITS


def length_of(value: int) -> int:
    return _LENGTH_MASK - (value & _LENGTH_MASK)


def saturation(tf: int, length: int, average: float) -> float:
    """``g(tf, length)``: the term part of a posting is ``idf × (k1 + 1)`` times this."""
    return tf / (tf + K1 * (1.0 - B + B * length / average))


def remaining_bound(last: int, average: float) -> float:
    """The largest ``g`` of any posting listed after the one of impact ``last``."""
    tf, length = tf_of(last), length_of(last)
    bound = saturation(tf, length, average)
    if tf > 1:  # a smaller tf, at the shortest length it allows (an item holds its tf)
        bound = max(bound, saturation(tf - 1, tf - 1, average))
    return bound


def cutoff(level: float, average: float) -> int:
    """The smallest impact a list must be read down to so that every posting below it
    has ``g`` under ``level``: 0 (read everything) for a level of 0 or less.

    A key ``impact(tf, length)`` leaves unread the postings of a smaller tf, whose ``g``
    is at most ``g(tf - 1, tf - 1)`` (an item holds its tf), and those of the same tf and
    a greater length. So tf is the largest whose predecessor stays under the level, and
    length the last one whose successor does.
    """
    level -= 1e-9  # rounding: read a hair more rather than less
    if level <= 0.0:
        return 0
    c, d = K1 * (1.0 - B), K1 * B / average
    slope = 1.0 - level * (1.0 + d)  # g(t, t) <= level  <=>  t * slope <= level * c
    tf = _LENGTH_MASK if slope <= 0 else min(_LENGTH_MASK, int(level * c / slope) + 1)
    # g(tf, x) <= level  <=>  x >= (tf / level - tf - c) / d
    solved = (tf / level - tf - c) / d
    length = max(tf - 1, math.ceil(solved) - 1)
    return impact(tf, min(length, _LENGTH_MASK))


__all__ = ["cutoff", "impact", "impact_rows", "length_of", "remaining_bound", "saturation", "tf_of"]


def document_columns(rowid: int, scope: int, item: ItemState, index: IndexDoc) -> tuple[Any, ...]:
    """The ``search_docs`` columns both backends store alike, before the terms and their
    frequencies, which each backend encodes its own way."""
    return (
        rowid,
        scope,
        index.length,
        item.confidence,
        to_micros(item.updated_at),
        to_micros(item.expires_at),
        item.kind._value_,  # Enum.value's property costs three times as much (codec.item_row)
    )
