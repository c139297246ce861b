"""The exact top ``want`` of a large scope, read from impact-ordered postings.

Each query term's postings are listed best first by their primary key
(:mod:`governed_memory.store.impact`), so the best of a long list is read without
scoring or sorting the rest. Three steps:

1. The first page of every list is read and its items scored exactly from their
   documents (one row each: length, confidence, last change, expiry, kind and every term's
   frequency): the ``want``-th best of those scores, ``θ``, is a lower bound of the final
   cut.
2. Each list gets its own cutoff, between two of its tiers (its postings of one tf,
   counted once per scope generation by the caller), so that the bounds of what the lists
   leave unread (exactly: the best posting of the tiers below the cut) plus the static
   maximum stay under ``θ``: an item met in no list cannot compete. Of those combinations
   the one reading the fewest postings is taken (a short list is read whole; if the tiers
   are not enough, the long lists are read down to one common level). Every list is
   read down to its cutoff, from the heads kept in memory between searches
   (:mod:`.heads`; only what they lack comes from the database), and the items met
   there whose upper bound reaches ``θ`` are returned best bound first. The bound is
   their exact parts in the lists they were met in, the static maximum, and for each
   other list the most it can add at the item's length: a list an item was not met in
   can add at most its largest unread tf's part at that length, and at most its bound.
   Most items are met in one list only; their bound depends on the impact of that one
   posting, so they are bounded a run of equal impacts at a time, not one by one.
3. Those are scored exactly in that order, ``STEP`` at a time, until the next bound falls
   under the ``want``-th best score found: nothing after it can rank in the first ``want``.

The first cut is often well under the final one. When its cheapest combination of tiers
would read more than ``HOPE_READ`` postings, a first pass reads that many (the combination with the
smallest bounds within them) and cuts at what those bounds prove; the items it scores
usually reach that cut, which is then proven, and otherwise the lists are planned again
with the better cut they gave.

The threshold algorithm of Fagin et al. with MaxScore's per-list bounds. The scores are
the core's formula (:func:`governed_memory.core.retrieval.lexical_part` and
:func:`~governed_memory.core.retrieval.static_parts`) on integer microseconds; the core
ranks the survivors again, so a rounding margin keeps every possible contender.
"""

from __future__ import annotations

import heapq
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from governed_memory.core.retrieval import (
    K1,
    MICROS_PER_DAY,
    STATIC_MAX,
    lexical_part,
    static_parts,
)
from governed_memory.store.impact import cutoff, length_of, saturation, tf_of
from governed_memory.store.sqlite import sql
from governed_memory.store.sqlite.database import SQLiteDatabase
from governed_memory.store.sqlite.heads import ScopeHeads, end_of
from governed_memory.store.sqlite.index_rows import frequencies_in, needles

#: Scores computed here and by the core may differ in the last bits; contenders are
#: taken within this margin of the cut so rounding never drops one.
MARGIN = 1e-6
#: The first page of a list, whose best items (by their known parts) give the first cut:
#: this many per result wanted.
FIRST_PAGE = 256
_FIRST_SCORED = 5
#: A list of at most this many postings is read whole.
WHOLE_LIST = 8_192
#: A long list's tiers are read at least down to the deepest cut reading this many postings
#: (an unread list's bound would let every item met elsewhere compete, and each would be
#: scored from its document).
SHORT_HEAD = 3_000
#: When the first cut needs more postings than this read, a first pass reads this many
#: in the hope of a higher cut.
HOPE_READ = 4_000
#: Items met in the heads, returned best bound first, at most this many at once.
_MET_PAGE = 1_000
#: A cutoff above every impact: a list left unread.
_UNREAD = 1 << 62
#: Combinations of cuts tried at most, for a query of many long lists.
_PLANS_TRIED = 20_000
#: Documents read in one statement.
CHUNK = 500
#: Met items scored at a time, best bound first, before the cut is checked again: the
#: bounds fall slowly and the ``want``-th best score rises fast, so a small step stops
#: soon after the last item that can compete (each step is one statement).
STEP = 128

#: A tier of a term's list, its postings of one tf: (tf, how many, the best impact).
Tier = tuple[int, int, int]
#: A document as read: item, length, confidence, updated_at, expires_at, kind, terms, tfs.
Document = tuple[int, int, float, int, int, str, bytes, bytes]


@dataclass
class Scored:
    """The items scored exactly so far (``None``: filtered out), with the best ``want``."""

    want: int
    scores: dict[int, float | None] = field(default_factory=dict)
    facts: dict[int, tuple[dict[int, int], int]] = field(default_factory=dict)
    best: list[float] = field(default_factory=list)  # a min-heap of at most ``want``

    @property
    def kth(self) -> float:
        return self.best[0] if len(self.best) >= self.want else -math.inf

    def add(self, item: int, score: float | None, facts: tuple[dict[int, int], int]) -> None:
        self.scores[item] = score
        if score is None:
            return
        self.facts[item] = facts
        if len(self.best) < self.want:
            heapq.heappush(self.best, score)
        elif score > self.best[0]:
            heapq.heapreplace(self.best, score)

    def contenders(self) -> list[int]:
        """The scored items that can be among the first ``want`` (within the margin)."""
        cut = self.kth - MARGIN
        return [item for item, score in self.scores.items() if score is not None and score >= cut]


class ThresholdSearch:
    """The top ``want`` of one scope for one query."""

    def __init__(
        self,
        database: SQLiteDatabase,
        scope: int,
        weights: Mapping[int, float],
        average: float,
        now: int,
        kinds: frozenset[str] | None,
        tiers: Callable[[int], Sequence[Tier]],
        heads: ScopeHeads,
    ) -> None:
        self._db = database
        self._tiers = tiers
        self._heads = heads
        self._scope = scope
        self._weights = weights  # every query term's IDF, in query order (as the core sums)
        self._average = average
        self._now = now
        self._kinds = kinds
        self._needles = needles(weights)

    def run(self, frequencies: Mapping[int, int], want: int) -> Scored:
        """The exact scores of every item that can rank in the first ``want`` (and of
        some that cannot); ``frequencies``: the matching terms' document frequencies."""
        scored = Scored(want)
        self._first_cut(frequencies, scored)
        limit = _MET_PAGE
        hoping = True
        while True:
            # Planned again on each pass with the cut found so far (any exact ``want``-th
            # best score is a lower bound of the final one): a better cut, less to read.
            lists, read = self._plan(frequencies, scored.kth)
            cut = scored.kth
            if hoping and HOPE_READ < read < math.inf:
                # The first cut is often far under the final one: first read what
                # HOPE_READ postings can, which proves a higher cut if the items met
                # there score that high (they usually do); else plan again, with the
                # cut they gave. Not when the tiers cannot reach the first cut (many
                # common terms): the common level's first page finds better items.
                lists, cut = self._hope(frequencies)
            hoping = False
            met = self._met(lists, cut, limit)
            for start in range(0, len(met), STEP):
                kth = scored.kth - MARGIN
                rows = met[start : start + STEP]
                if rows[0][1] < kth:
                    break  # best bound first: nothing further can compete
                fresh = [item for item, upper in rows if upper >= kth and item not in scored.scores]
                self._score(fresh, scored)
            if len(met) == limit and met[-1][1] >= scored.kth - MARGIN:
                limit *= 32  # every item returned could compete: ask again, with the new cut
            elif scored.kth >= cut:
                return scored  # every item not scored is bounded under the cut

    def _met(
        self, lists: list[tuple[int, float, int, float]], cut: float, limit: int
    ) -> list[tuple[int, float]]:
        """The items met in the lists down to their cutoffs whose upper bound reaches
        ``cut``, best bound first, at most ``limit``: (item, bound).

        An item's bound is the static maximum, its exact parts in the lists it was met
        in, and for each list it was not met in, the most that list's unread postings
        can add at the item's length (:meth:`_unread_at`): every posting of an item has
        the item's length, so such a list adds at most the part of the largest tf it
        left unread at that length, and never more than its bound. An item met in one
        list only has a bound that depends on its posting's impact alone, so those are
        bounded a run of equal impacts at a time; the items met in several lists have
        their gains summed list by list, a run at a time.
        """
        floor = cut - MARGIN if cut > -math.inf else -math.inf
        unread_at = self._unread_at(lists)
        read = []  # each list read: its place in ``lists``, its cap, its impacts and items
        for place, (term, _, at, _) in enumerate(lists):
            if at < _UNREAD:
                impacts, items = self._heads.read(term, at)
                read.append((place, self._cap(term), impacts, items))
        read.sort(key=lambda entry: len(entry[3]))  # the smaller lists as sets
        several: set[int] = set()  # the items met in more than one list
        for i, (*_, items) in enumerate(read[:-1]):
            smaller = set(items)
            for *_, others in read[i + 1 :]:
                several |= smaller.intersection(others)
        # Those items' gains in each list (their part, less what that list could add
        # unread) and their length, kept by whole runs (dict.fromkeys) and summed
        # element-wise below: these loops stay in C, the items are many on common terms.
        gains: list[dict[int, float]] = []
        lengths: dict[int, int] = {}
        runs = []  # (bound, list, start, end): a run of equal impacts, for its single items
        for index, (place, cap, impacts, items) in enumerate(read):
            mine: dict[int, float] = {}
            start = 0
            while start < len(impacts):
                value = impacts[start]
                end = end_of(impacts, value)
                length = length_of(value)
                unread, each = unread_at(length)
                part = cap * saturation(tf_of(value), length, self._average)
                gain = part - each[place]
                shared = several.intersection(items[start:end]) if several else None
                if shared:
                    mine.update(dict.fromkeys(shared, gain))
                    lengths.update(dict.fromkeys(shared, length))
                upper = STATIC_MAX + unread + gain
                if upper >= floor:
                    runs.append((upper, index, start, end))
                start = end
            gains.append(mine)
        known = []
        if lengths:
            members = list(lengths)
            totals = {length: unread_at(length)[0] for length in set(lengths.values())}
            sums = list(map(totals.__getitem__, lengths.values()))
            for mine in gains:
                sums = list(map(operator.add, sums, map(mine.get, members, repeat(0.0))))
            known = [
                (STATIC_MAX + total, item)
                for total, item in zip(sums, members, strict=True)
                if STATIC_MAX + total >= floor
            ]
        known.sort(reverse=True)
        runs.sort(reverse=True)
        return _merged(known, runs, [items for *_, items in read], several, limit)

    def _unread_at(
        self, lists: list[tuple[int, float, int, float]]
    ) -> Callable[[int], tuple[float, list[float]]]:
        """At a given length, the most each list's unread postings can add to an item of
        that length (the part of the largest tf it leaves unread at that length, at most
        its bound; 0 for a list read whole), and their sum; memoized per length."""
        limits = [
            (bound, self._cap(term), self._unread_tf(term, at)) if at > 0 and bound > 0.0 else None
            for term, _, at, bound in lists
        ]
        memo: dict[int, tuple[float, list[float]]] = {}

        def unread_at(length: int) -> tuple[float, list[float]]:
            found = memo.get(length)
            if found is None:
                each = [
                    0.0
                    if limit is None
                    else min(limit[0], limit[1] * saturation(limit[2], length, self._average))
                    for limit in limits
                ]
                found = memo[length] = (sum(each), each)
            return found

        return unread_at

    def _unread_tf(self, term: int, at: int) -> int:
        """The largest tf a long list leaves unread below impact ``at`` (its cutoff)."""
        return min(tf_of(at - 1), max(tf for tf, *_ in self._tiers(term)))

    def _first_cut(self, frequencies: Mapping[int, int], scored: Scored) -> None:
        """Score the items that lead the lists' first pages: the first cut ``θ``."""
        known: dict[int, float] = {}
        for term in frequencies:
            weight = self._weights[term]
            for impact, item in zip(*self._heads.first(term, FIRST_PAGE), strict=True):
                part = (
                    weight
                    * (K1 + 1.0)
                    * saturation(tf_of(impact), length_of(impact), self._average)
                )
                known[item] = known.get(item, 0.0) + part
        self._score(
            heapq.nlargest(_FIRST_SCORED * scored.want, known, key=known.__getitem__), scored
        )

    def _plan(
        self, frequencies: Mapping[int, int], theta: float
    ) -> tuple[list[tuple[int, float, int, float]], float]:
        """Each list's (term, weight, cutoff, bound of what is left unread), so that the
        bounds plus the static maximum stay under ``θ``, reading as few postings as can be;
        and how many postings of the long lists that reads (infinite: not counted).

        A list is cut between two of its tiers (its postings of one tf: see
        :data:`Tier`): read down to tier ``tf``, its bound is the best posting of the
        tiers below, exactly; left unread, its best posting; read whole, 0. Short lists
        are read whole. Each long list gets its own cut: the combination that reads the
        fewest postings (counted per tier) with the bounds under ``θ``; a long list's head
        of at most ``SHORT_HEAD`` postings is always read (an unread list's bound would
        let every item met elsewhere compete, and each would be scored from its
        document). If no combination short of reading a long list whole is enough,
        every long list is read down to one common level
        (:func:`~governed_memory.store.impact.cutoff`).
        """
        budget = theta - STATIC_MAX - MARGIN
        state: dict[int, tuple[int, float]] = {}
        choices: dict[int, list[tuple[int, int, float]]] = {}
        for term, n in frequencies.items():
            if n <= WHOLE_LIST:
                state[term] = (0, 0.0)
            else:
                choices[term] = self._cuts(term)
        best = _cheapest(list(choices.values()), budget) if choices else []
        read = math.inf
        if best is not None:
            read = sum(n for n, *_ in best)
            state |= {term: (at, bound) for term, (_, at, bound) in zip(choices, best, strict=True)}
        else:
            level = min(1.0, budget / sum(self._cap(t) for t in choices))
            at = cutoff(level, self._average)
            state |= {t: (at, self._cap(t) * level if at else 0.0) for t in choices}
        return [(t, self._weights[t], *state[t]) for t in frequencies], read

    def _hope(
        self, frequencies: Mapping[int, int]
    ) -> tuple[list[tuple[int, float, int, float]], float]:
        """The lists cut so that at most ``HOPE_READ`` postings of the long lists are read,
        with the smallest bounds that allows, and the cut those bounds prove."""
        state = {t: (0, 0.0) for t, n in frequencies.items() if n <= WHOLE_LIST}
        choices = {t: self._cuts(t) for t in frequencies if t not in state}
        best = _tightest(list(choices.values()), HOPE_READ)
        state |= {term: (at, bound) for term, (_, at, bound) in zip(choices, best, strict=True)}
        lists = [(t, self._weights[t], *state[t]) for t in frequencies]
        return lists, sum(bound for *_, bound in lists) + STATIC_MAX + 2 * MARGIN

    def _cuts(self, term: int) -> list[tuple[int, int, float]]:
        """A long list's possible cuts, each (postings read, cutoff, bound of the rest),
        from reading the fewest postings to the most, short of its last tier (tf = 1):
        every cut reading at most ``SHORT_HEAD`` postings but the deepest is dropped."""
        cap = self._cap(term)
        tiers = sorted(self._tiers(term), reverse=True)  # by tf, best first
        best = [saturation(tf, length_of(top), self._average) for tf, _, top in tiers]
        cuts = [(0, _UNREAD, cap * max(best))]
        read = 0
        for i, (tf, count, _) in enumerate(tiers):
            if tf == 1:
                break
            read += count
            cuts.append((read, tf << 16, cap * max(best[i + 1 :], default=0.0)))
        short = [cut for cut in cuts if cut[0] <= SHORT_HEAD]
        return short[-1:] + cuts[len(short) :]

    def _cap(self, term: int) -> float:
        return self._weights[term] * (K1 + 1.0)

    def _score(self, items: list[int], scored: Scored) -> None:
        """Score ``items`` exactly from their documents (read in rowid order: a B-tree walk
        rather than random descents)."""
        items.sort()
        for start in range(0, len(items), CHUNK):
            chunk = items[start : start + CHUNK]
            for row in self._db.query(sql.documents(len(chunk)), chunk):
                item, facts, score = self.exact(row)
                scored.add(item, score, facts)

    def exact(self, row: Sequence[Any]) -> tuple[int, tuple[dict[int, int], int], float | None]:
        """A document's item, its query terms' frequencies and length, and its score by the
        core's formula (``None`` if expired, of a kind not asked for, or unreadable)."""
        item, length, confidence, updated_at, expires_at, kind, terms, tfs = row
        frequencies = frequencies_in(terms, tfs, self._needles)
        if frequencies is None:  # damaged: no score until a rebuild indexes it again
            return item, ({}, length), None
        if expires_at <= self._now or (self._kinds is not None and kind not in self._kinds):
            return item, (frequencies, length), None
        age_days = max(0, self._now - updated_at) / MICROS_PER_DAY
        score = lexical_part(self._weights, frequencies, length, self._average) + sum(
            static_parts(confidence, age_days)
        )
        return item, (frequencies, length), score


def _merged(
    known: list[tuple[float, int]],
    runs: list[tuple[float, int, int, int]],
    items: Sequence[Sequence[int]],
    several: set[int],
    limit: int,
) -> list[tuple[int, float]]:
    """The first ``limit`` of the items met in several lists (``known``: bound, item) and
    of the runs of items met in one (bound, list, start, end), best bound first."""
    met: list[tuple[int, float]] = []
    next_known = 0
    for upper, index, start, end in runs:
        while next_known < len(known) and known[next_known][0] >= upper and len(met) < limit:
            met.append((known[next_known][1], known[next_known][0]))
            next_known += 1
        for item in items[index][start:end]:
            if len(met) >= limit:
                return met
            if item not in several:
                met.append((item, upper))
    met += [(item, upper) for upper, item in known[next_known:]]
    return met[:limit]


def _cheapest(
    choices: Sequence[Sequence[tuple[int, int, float]]], budget: float
) -> list[tuple[int, int, float]] | None:
    """One cut per list, the fewest postings read in all, whose bounds sum under
    ``budget``; ``None`` if there is none. Each list's cuts go from fewest postings read
    (largest bound) to most (smallest): a depth-first search, pruned by the best total
    found and by the smallest bounds the remaining lists can reach; past
    ``_PLANS_TRIED`` steps, the best found so far (any combination under the budget is
    exact, only slower)."""
    floor = [0.0] * (len(choices) + 1)
    for i in range(len(choices) - 1, -1, -1):
        floor[i] = floor[i + 1] + choices[i][-1][2]
    best: list[tuple[int, int, float]] | None = None
    best_read = math.inf
    chosen: list[tuple[int, int, float]] = []

    tried = 0

    def search(i: int, read: int, bound: float) -> None:
        nonlocal best, best_read, tried
        tried += 1
        if read >= best_read or bound + floor[i] >= budget or tried > _PLANS_TRIED:
            return
        if i == len(choices):
            best, best_read = list(chosen), read
            return
        for cut in choices[i]:
            chosen.append(cut)
            search(i + 1, read + cut[0], bound + cut[2])
            chosen.pop()

    search(0, 0, 0.0)
    return best


def _tightest(
    choices: Sequence[Sequence[tuple[int, int, float]]], most: int
) -> list[tuple[int, int, float]]:
    """One cut per list, the smallest bounds in all reading at most ``most`` postings
    (each list's first cut if even those read more): a depth-first search like
    :func:`_cheapest`'s."""
    floor = [0] * (len(choices) + 1)
    for i in range(len(choices) - 1, -1, -1):
        floor[i] = floor[i + 1] + choices[i][0][0]
    best = [cuts[0] for cuts in choices]
    best_bound = math.inf
    chosen: list[tuple[int, int, float]] = []
    tried = 0

    def search(i: int, read: int, bound: float) -> None:
        nonlocal best, best_bound, tried
        tried += 1
        if bound >= best_bound or read + floor[i] > most or tried > _PLANS_TRIED:
            return
        if i == len(choices):
            best, best_bound = list(chosen), bound
            return
        for cut in reversed(choices[i]):  # the smallest bounds first
            chosen.append(cut)
            search(i + 1, read + cut[0], bound + cut[2])
            chosen.pop()

    search(0, 0, 0.0)
    return best


__all__ = ["MARGIN", "Scored", "ThresholdSearch", "Tier"]
