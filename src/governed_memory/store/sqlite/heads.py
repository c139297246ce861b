"""The heads of a large scope's postings lists, kept in memory between searches.

The threshold search (:mod:`.threshold`) reads each query term's list best first down to
a cutoff, and the same terms come back query after query. A list's head, as read, is kept
here as two compact arrays (impacts and items, in the list's order: impact, then item,
descending) with the lowest impact it is complete down to; a later search of the same
term reads what it needs from memory, and only the part of the list below the head from
the database (which extends the head).

A head belongs to one generation of its scope: every change of a scope's postings moves
the generation (search.py), and a head of another generation is read again, never
patched. A search runs in one snapshot, in which the generation and the postings agree.
The heads together hold at most ``budget`` postings (12 bytes each, and a head's own
objects counted as a few dozen more); past it, the least recently used go.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from governed_memory.store.sqlite import sql
from governed_memory.store.sqlite.database import SQLiteDatabase

#: Postings kept in all (impact 4 bytes, item 8 bytes): about 18 MB at most. The heads
#: a 100k-item scope's 2,000 benchmark queries read come to about 1.4 million postings;
#: with fewer kept, most of them were read from the database again.
HEADS_BUDGET = 1_500_000
#: Postings read from the database at a time (a long head is not held as rows at once).
PAGE = 8192
#: A head's own objects (the head, its two arrays, its key and entry), in postings.
_OVERHEAD = 32


@dataclass(frozen=True, slots=True)
class Head:
    """Every posting of a list with impact ``low`` or more, best first."""

    generation: int
    low: int
    impacts: array[int]
    items: array[int]


def end_of(impacts: Sequence[int], at: int) -> int:
    """How many of ``impacts`` (descending) are at least ``at``."""
    lo, hi = 0, len(impacts)
    while lo < hi:
        mid = (lo + hi) // 2
        if impacts[mid] >= at:
            lo = mid + 1
        else:
            hi = mid
    return lo


class PostingHeads:
    """The heads of postings lists read so far, per (scope, term), bounded in size."""

    def __init__(self, database: SQLiteDatabase, budget: int | None = None) -> None:
        self._db = database
        self.budget = HEADS_BUDGET if budget is None else budget
        self.held = 0  # postings held in all, with each head's overhead
        self._heads: OrderedDict[tuple[int, int], Head] = OrderedDict()
        self._lock = threading.Lock()  # the heads are shared by every thread's searches

    def read(
        self, scope: int, generation: int, term: int, at: int
    ) -> tuple[memoryview, memoryview]:
        """The term's postings of impact ``at`` or more in the scope, best first: their
        impacts and items."""
        head = self._current(scope, generation, term)
        if head is None or at < head.low:
            head = self._extend(scope, generation, term, head, at)
        end = end_of(head.impacts, at)
        return memoryview(head.impacts)[:end], memoryview(head.items)[:end]

    def first(
        self, scope: int, generation: int, term: int, count: int
    ) -> tuple[memoryview, memoryview]:
        """The term's first ``count`` postings in the scope (fewer if the list is
        shorter), best first, as :data:`sql.FIRST_POSTINGS` lists them."""
        head = self._current(scope, generation, term)
        if head is None or (len(head.items) < count and head.low > 0):
            rows = self._db.query(sql.FIRST_POSTINGS, (scope, term, count))
            impacts, items = array("I", [r[0] for r in rows]), array("q", [r[1] for r in rows])
            # Complete down to the last impact read, unless the page stopped inside it.
            low = 0 if len(rows) < count else impacts[-1] + 1
            if head is None or low < head.low:
                end = end_of(impacts, low)
                self._keep(scope, term, Head(generation, low, impacts[:end], items[:end]))
            return memoryview(impacts), memoryview(items)
        return memoryview(head.impacts)[:count], memoryview(head.items)[:count]

    def _current(self, scope: int, generation: int, term: int) -> Head | None:
        with self._lock:
            head = self._heads.get((scope, term))
            if head is None or head.generation != generation:
                return None
            self._heads.move_to_end((scope, term))
            return head

    def _extend(self, scope: int, generation: int, term: int, head: Head | None, at: int) -> Head:
        """The head read down to ``at``: what the database holds below the known head."""
        if head is None:
            pages = self._db.query_pages(sql.HEAD_POSTINGS, (scope, term, at), PAGE)
            impacts, items = array("I"), array("q")
        else:
            pages = self._db.query_pages(sql.BELOW_HEAD_POSTINGS, (scope, term, head.low, at), PAGE)
            impacts, items = array("I", head.impacts), array("q", head.items)
        for rows in pages:
            impacts.extend([r[0] for r in rows])
            items.extend([r[1] for r in rows])
        longer = Head(generation, max(at, 0), impacts, items)
        self._keep(scope, term, longer)
        return longer

    def _keep(self, scope: int, term: int, head: Head) -> None:
        size = _size(head)
        if size > self.budget:
            return
        with self._lock:
            old = self._heads.pop((scope, term), None)
            if old is not None:
                self.held -= _size(old)
            self._heads[(scope, term)] = head
            self.held += size
            while self.held > self.budget:
                _, dropped = self._heads.popitem(last=False)
                self.held -= _size(dropped)


def _size(head: Head) -> int:
    """What a head costs of the budget: its postings, and its own objects (a few hundred
    bytes, about ``_OVERHEAD`` postings), so that many short heads stay bounded too."""
    return len(head.items) + _OVERHEAD


@dataclass(frozen=True, slots=True)
class ScopeHeads:
    """The heads of one scope's lists at one generation: what a search reads them by."""

    heads: PostingHeads
    scope: int
    generation: int

    def read(self, term: int, at: int) -> tuple[memoryview, memoryview]:
        """The term's postings of impact ``at`` or more, best first (impacts, items)."""
        return self.heads.read(self.scope, self.generation, term, at)

    def first(self, term: int, count: int) -> tuple[memoryview, memoryview]:
        """The term's first ``count`` postings, best first (impacts, items)."""
        return self.heads.first(self.scope, self.generation, term, count)


__all__ = ["HEADS_BUDGET", "Head", "PostingHeads", "ScopeHeads", "end_of"]
