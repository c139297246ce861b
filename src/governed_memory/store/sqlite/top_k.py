"""Scoped search over SQLite postings: hard filters in SQL, exact top-k without full scans.

Postings are keyed ``(scope, term, item)``, so every query starts inside one
(tenant, agent, purpose) scope and never reads another scope's rows. Within a large scope a
common term can have tens of thousands of postings; shipping them all to Python would cost
a second. Instead each round asks SQLite for the ``M`` best postings of each query term by
*term part + confidence + recency* (computed in SQL with the core's formula), scores the
union exactly in Python, and stops when the ``want``-th best score beats the bound on any
item not yet seen (:func:`governed_memory.core.retrieval.unseen_bound`); otherwise ``M``
grows. Small scopes and subject-filtered searches read their few matches directly.

Whether a scope is small is decided once, by :mod:`.search`, which then calls
:meth:`ScopedSearch.small` or :meth:`ScopedSearch.large`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from governed_memory.core.retrieval import (
    CONFIDENCE_WEIGHT,
    K1,
    MICROS_PER_DAY,
    RECENCY_HALF_LIFE_MICROS,
    RECENCY_WEIGHT,
    STATIC_MAX,
    B,
    Candidate,
    ScopeStatistics,
    idf,
    lexical_part,
    static_parts,
    term_upper_bound,
    unseen_bound,
)
from governed_memory.core.values import from_micros, to_micros
from governed_memory.records import SearchMatches, SearchRequest
from governed_memory.store.sqlite import sql
from governed_memory.store.sqlite.database import SQLiteDatabase

#: A posting as read: term, item, tf, length, confidence, updated_at, expires_at, kind.
Posting = tuple[int, int, int, int, float, int, int, str]

CHUNK = 500
FIRST_ROUND = 32
#: Scores computed here and by the core may differ in the last bits; contenders are
#: taken within this margin of the cut so rounding never drops one.
_MARGIN = 1e-6


def _chunks(values: Sequence[int]) -> Iterable[Sequence[int]]:
    for start in range(0, len(values), CHUNK):
        yield values[start : start + CHUNK]


class ScopedSearch:
    """One search against one scope, reading through the store's database."""

    def __init__(self, database: SQLiteDatabase, request: SearchRequest, scope: int) -> None:
        self.db = database
        self.request = request
        self.scope = scope
        self.now = to_micros(request.now)
        self.known: dict[int, Candidate | None] = {}

    def small(self, statistics: ScopeStatistics, postings: Sequence[Posting]) -> SearchMatches:
        """The candidates of a small scope, from ``postings``: every posting of the query
        terms, already read; nothing more is read from the postings."""
        if not self._matching_terms(statistics):
            return SearchMatches(statistics, [])
        return self._from_postings(statistics, postings)

    def large(self, statistics: ScopeStatistics) -> SearchMatches:
        """The candidates of a scope too large to read whole: a subject's items, every
        match when the caller wants them all, else the top ``want`` by the threshold
        algorithm."""
        terms = self._matching_terms(statistics)
        if not terms:
            return SearchMatches(statistics, [])
        if self.request.subject_id is not None:
            self._collect(self._subject_items())
            return SearchMatches(statistics, self._candidates())
        want = self.request.want
        if want is None:
            self._collect(self._all_items(terms))
            return SearchMatches(statistics, self._candidates())
        return self._top(statistics, terms, want)

    def _matching_terms(self, statistics: ScopeStatistics) -> list[int]:
        """The distinct query terms that occur in the scope."""
        return [t for t in dict.fromkeys(self.request.terms) if statistics.document_frequency[t]]

    def _top(self, statistics: ScopeStatistics, terms: list[int], want: int) -> SearchMatches:
        """Threshold algorithm over the essential terms, scoring in bounds, not in full.

        Terms are taken rarest first (largest possible contribution); only the essential
        prefix has its postings lists read, best first. A list row tells an item's
        static part and that term's part, so every seen item has a lower bound (what is
        known) and an upper bound (plus, for each term not seen with it, what that term
        could still add). An unseen item is bounded by the threshold-algorithm bound over
        the unfinished lists plus the caps of the other terms. Once the ``want``-th best
        lower bound beats every unseen item, only the seen items whose upper bound
        reaches that threshold can be in the top ``want``: those are scored exactly.
        """
        weights = {t: idf(statistics.documents, statistics.document_frequency[t]) for t in terms}
        uppers = {t: term_upper_bound(w) for t, w in weights.items()}
        order = sorted(terms, key=lambda t: (-uppers[t], t))
        essential, size = 1, max(FIRST_ROUND, 4 * want)
        while True:
            read = order[:essential]
            lasts, seen = self._read_lists(statistics, read, weights, size)
            rest = sum(uppers[t] for t in order[essential:])
            bounds = [unseen_bound(lasts, uppers) + rest] if lasts else []
            if essential < len(order):
                bounds.append(STATIC_MAX + rest)
            if not bounds:  # every matching item has been seen
                self._collect(seen)
                return SearchMatches(statistics, self._candidates())
            lower = {item: static + sum(parts.values()) for item, (static, parts) in seen.items()}
            best = sorted(lower.values(), reverse=True)
            threshold = best[want - 1] if len(best) >= want else -math.inf
            if threshold > max(bounds) + 1e-9:
                contenders = [
                    item
                    for item, (static, parts) in seen.items()
                    if lower[item] + rest + self._caps(read, parts, static, lasts, uppers)
                    >= threshold - 1e-9
                ]
                self._collect(contenders)
                return SearchMatches(statistics, self._candidates(), complete=False)
            if essential < len(order) and (not lasts or threshold <= STATIC_MAX + rest + 1e-9):
                essential += 1  # items holding only the other terms could still compete
            else:
                size *= 8

    def _from_postings(
        self, statistics: ScopeStatistics, postings: Sequence[Posting]
    ) -> SearchMatches:
        """Rank a small scope on its postings, then materialize only the contenders.

        Postings carry their item's length, confidence, last change, expiry and kind, so
        every item's score is known before its row is read. Only the items that can be
        in the first ``want`` places (within a rounding margin; the core ranks them
        again exactly) are read from ``memories``, where the hard filters are checked
        once more. A subject-filtered search reads every matching item: its subject is
        known only from the item's row.
        """
        kinds = {kind.value for kind in self.request.kinds} if self.request.kinds else None
        frequencies: dict[int, dict[int, int]] = {}
        lengths: dict[int, int] = {}
        statics: dict[int, tuple[float, int]] = {}
        for term, item, tf, length, confidence, updated_at, expires_at, kind in postings:
            if expires_at <= self.now or (kinds is not None and kind not in kinds):
                continue
            frequencies.setdefault(item, {})[term] = tf
            lengths[item] = length
            statics[item] = (confidence, updated_at)
        want = self.request.want
        contenders: Iterable[int] = frequencies
        pruned = False
        if self.request.subject_id is None and want is not None and len(frequencies) > want:
            scores = self._scores(statistics, frequencies, lengths, statics)
            threshold = sorted(scores.values(), reverse=True)[want - 1] - _MARGIN
            contenders = [item for item, score in scores.items() if score >= threshold]
            pruned = len(contenders) < len(frequencies)
        self._collect(contenders, (frequencies, lengths))
        return SearchMatches(statistics, self._candidates(), complete=not pruned)

    def _scores(
        self,
        statistics: ScopeStatistics,
        frequencies: dict[int, dict[int, int]],
        lengths: dict[int, int],
        statics: dict[int, tuple[float, int]],
    ) -> dict[int, float]:
        """Each item's score by the core's formula (:func:`~governed_memory.core.retrieval.rank`)
        on integer microseconds; equal to it up to rounding, which ``_MARGIN`` covers."""
        weights = {
            t: idf(statistics.documents, statistics.document_frequency[t])
            for t in dict.fromkeys(self.request.terms)
        }
        average = statistics.average_length
        scores = {}
        for item, tfs in frequencies.items():
            confidence, updated_at = statics[item]
            age_days = max(0, self.now - updated_at) / MICROS_PER_DAY
            scores[item] = lexical_part(weights, tfs, lengths[item], average) + sum(
                static_parts(confidence, age_days)
            )
        return scores

    @staticmethod
    def _caps(
        read: list[int],
        parts: dict[int, float],
        static: float,
        lasts: dict[int, float],
        uppers: dict[int, float],
    ) -> float:
        """What the read terms an item was not seen with could still add to its score."""
        cap = 0.0
        for term in read:
            if term not in parts and term in lasts:  # absent from a finished list: not held
                cap += min(uppers[term], max(0.0, lasts[term] - static))
        return cap

    def _read_lists(
        self,
        statistics: ScopeStatistics,
        terms: list[int],
        weights: dict[int, float],
        size: int,
    ) -> tuple[dict[int, float], dict[int, tuple[float, dict[int, float]]]]:
        """The top ``size`` eligible postings of each term, gathered per item.

        Returns the last value of every unfinished list, and for each seen item its
        static part and the term parts seen.
        """
        lasts: dict[int, float] = {}
        seen: dict[int, tuple[float, dict[int, float]]] = {}
        static_params = (CONFIDENCE_WEIGHT, RECENCY_WEIGHT, self.now, RECENCY_HALF_LIFE_MICROS)
        kinds = sorted(kind.value for kind in self.request.kinds) if self.request.kinds else []
        statement = sql.TOP_POSTINGS
        if kinds:
            statement += f" AND kind IN ({sql.marks(len(kinds))})"
        statement += " ORDER BY value DESC LIMIT ?"
        for term in terms:
            params = (
                *static_params,
                weights[term],
                K1 + 1.0,
                K1,
                1.0 - B,
                B,
                statistics.average_length,
                *static_params,
                self.scope,
                term,
                self.now,
                *kinds,
                size,
            )
            rows = self.db.query(statement, params)
            for item, static, value in rows:
                entry = seen.get(item)
                if entry is None:
                    entry = seen[item] = (static, {})
                entry[1][term] = value - static
            if len(rows) == size:
                lasts[term] = rows[-1][2]
        return lasts, seen

    def _subject_items(self) -> list[int]:
        request = self.request
        rows = self.db.query(
            sql.SUBJECT_ROWIDS,
            (request.tenant_id, request.subject_id, request.agent_id, request.purpose),
        )
        return [row[0] for row in rows]

    def _all_items(self, terms: list[int]) -> list[int]:
        rows = self.db.query(sql.items_of_terms(len(terms)), (self.scope, *terms))
        return [row[0] for row in rows]

    def _collect(
        self,
        items: Iterable[int],
        known: tuple[dict[int, dict[int, int]], dict[int, int]] | None = None,
    ) -> None:
        """Materialize not-yet-known items: hard filters, then their term frequencies
        (read from the postings unless ``known`` holds them with the items' lengths)."""
        new = sorted({item for item in items if item not in self.known})
        for chunk in _chunks(new):
            eligible = self._eligible(chunk)
            if known is not None:
                frequencies, lengths = known
            else:
                frequencies, lengths = self._frequencies(sorted(eligible))
            for item in chunk:
                row = eligible.get(item)
                if row is None or item not in frequencies:
                    self.known[item] = None  # filtered out, or matches no query term
                    continue
                _, memory_id, confidence, updated_at, tokens = row
                self.known[item] = Candidate(
                    memory_id,
                    frequencies[item],
                    lengths[item],
                    confidence,
                    from_micros(updated_at),
                    tokens,
                )

    def _eligible(self, items: Sequence[int]) -> dict[int, tuple[Any, ...]]:
        """The rows of those ``items`` that pass every hard filter, by rowid."""
        request = self.request
        statement = sql.eligible_items(len(items))
        params: list[Any] = [
            *items,
            request.tenant_id,
            request.agent_id,
            request.purpose,
            self.now,
        ]
        if request.subject_id is not None:
            statement += " AND +subject_id = ?"
            params.append(request.subject_id)
        if request.kinds:
            kinds = sorted(kind.value for kind in request.kinds)
            statement += f" AND +kind IN ({sql.marks(len(kinds))})"
            params += kinds
        return {row[0]: row for row in self.db.query(statement, params)}

    def _frequencies(
        self, items: Sequence[int]
    ) -> tuple[dict[int, dict[int, int]], dict[int, int]]:
        """The query terms' frequencies in each of ``items``, and the items' lengths."""
        frequencies: dict[int, dict[int, int]] = {}
        lengths: dict[int, int] = {}
        if not items:
            return frequencies, lengths
        terms = list(dict.fromkeys(self.request.terms))
        for item, term, tf, length in self.db.query(
            sql.term_frequencies(len(terms), len(items)), (self.scope, *terms, *items)
        ):
            frequencies.setdefault(item, {})[term] = tf
            lengths[item] = length
        return frequencies, lengths

    def _candidates(self) -> list[Candidate]:
        return [c for c in self.known.values() if c is not None]


__all__ = ["FIRST_ROUND", "Posting", "ScopedSearch"]
