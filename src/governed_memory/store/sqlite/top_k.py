"""Scoped search over SQLite postings: hard filters in SQL, exact top-k without full scans.

Postings are keyed ``(scope, term, impact, item)``, so every query starts inside one
(tenant, agent, purpose) scope and never reads another scope's rows, and a term's
postings are listed best first. A small scope is ranked on its postings and documents
(one read); a large one goes to the threshold algorithm (:mod:`.threshold`), which reads
the best postings of each term a page at a time and scores only the items that can
compete. Subject-filtered searches, and searches that want every match, read their
matches directly.

Whether a scope is small is decided once, by :mod:`.search`, which then calls
:meth:`ScopedSearch.small` or :meth:`ScopedSearch.large`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from governed_memory.core.retrieval import (
    MICROS_PER_DAY,
    Candidate,
    ScopeStatistics,
    idf,
    lexical_part,
    static_parts,
)
from governed_memory.core.values import from_micros, to_micros
from governed_memory.records import SearchMatches, SearchRequest
from governed_memory.store.found import Found
from governed_memory.store.impact import length_of, tf_of
from governed_memory.store.sqlite import sql
from governed_memory.store.sqlite.database import SQLiteDatabase
from governed_memory.store.sqlite.heads import ScopeHeads
from governed_memory.store.sqlite.index_rows import unpack
from governed_memory.store.sqlite.threshold import MARGIN, ThresholdSearch, Tier

#: A posting as read: term, item, impact, confidence, updated_at, expires_at, kind.
Posting = tuple[int, int, int, float, int, int, str]

CHUNK = 500
FIRST_ROUND = 32


def _chunks(values: Sequence[int]) -> Iterable[Sequence[int]]:
    for start in range(0, len(values), CHUNK):
        yield values[start : start + CHUNK]


class ScopedSearch:
    """One search against one scope, reading through the store's database."""

    def __init__(
        self,
        database: SQLiteDatabase,
        request: SearchRequest,
        scope: int,
        tiers: Callable[[int], Sequence[Tier]],
        heads: ScopeHeads,
        found: Found | None = None,
        rows_limit: int = 0,
    ) -> None:
        self.db = database
        self.request = request
        self.scope = scope
        self.tiers = tiers  # a term's tiers (see threshold.py), cached by the caller
        self.heads = heads  # the heads of the scope's lists, kept by the caller (heads.py)
        self.now = to_micros(request.now)
        self.known: dict[int, Candidate | None] = {}
        #: Where the rows and keys of the items read with their filters go (the
        #: request's ``rows``), as long as no more than ``rows_limit`` items are read so.
        self.found = found
        self.rows_limit = rows_limit

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
        """The exact top ``want`` by the threshold algorithm over impact-ordered lists;
        only the contenders are read from ``memories``."""
        kinds = {kind.value for kind in self.request.kinds} if self.request.kinds else None
        search = ThresholdSearch(
            self.db,
            self.scope,
            self._weights(statistics),
            statistics.average_length,
            self.now,
            frozenset(kinds) if kinds is not None else None,
            self.tiers,
            self.heads,
        )
        scored = search.run({t: statistics.document_frequency[t] for t in terms}, want)
        contenders = scored.contenders()
        frequencies = {item: scored.facts[item][0] for item in contenders}
        lengths = {item: scored.facts[item][1] for item in contenders}
        self._collect(contenders, (frequencies, lengths))
        return SearchMatches(statistics, self._candidates(), complete=False)

    def _weights(self, statistics: ScopeStatistics) -> dict[int, float]:
        """Every query term's IDF, in the query's order (the order the core sums in)."""
        return {
            t: idf(statistics.documents, statistics.document_frequency[t])
            for t in dict.fromkeys(self.request.terms)
        }

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
        for term, item, impact, confidence, updated_at, expires_at, kind in postings:
            if expires_at <= self.now or (kinds is not None and kind not in kinds):
                continue
            frequencies.setdefault(item, {})[term] = tf_of(impact)
            lengths[item] = length_of(impact)
            statics[item] = (confidence, updated_at)
        want = self.request.want
        contenders: Iterable[int] = frequencies
        pruned = False
        if self.request.subject_id is None and want is not None and len(frequencies) > want:
            scores = self._scores(statistics, frequencies, lengths, statics)
            threshold = sorted(scores.values(), reverse=True)[want - 1] - MARGIN
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
        weights = self._weights(statistics)
        average = statistics.average_length
        scores = {}
        for item, tfs in frequencies.items():
            confidence, updated_at = statics[item]
            age_days = max(0, self.now - updated_at) / MICROS_PER_DAY
            scores[item] = lexical_part(weights, tfs, lengths[item], average) + sum(
                static_parts(confidence, age_days)
            )
        return scores

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
        found = self.found
        if found is not None and len(self.known) + len(new) > self.rows_limit:
            found = None  # too many: the candidates' rows are read by id after (search.py)
        for chunk in _chunks(new):
            eligible = self._eligible(chunk, with_rows=found is not None)
            if known is not None:
                frequencies, lengths = known
            else:
                frequencies, lengths = self._frequencies(sorted(eligible))
            for item in chunk:
                row = eligible.get(item)
                if row is None or item not in frequencies:
                    self.known[item] = None  # filtered out, or matches no query term
                    continue
                _, memory_id, confidence, updated_at, tokens = row[: sql.ELIGIBLE_COLUMNS]
                if found is not None:  # a candidate's row and keys, read with its filters
                    found.add(row[sql.ELIGIBLE_COLUMNS :])
                self.known[item] = Candidate(
                    memory_id,
                    frequencies[item],
                    lengths[item],
                    confidence,
                    from_micros(updated_at),
                    tokens,
                )

    def _eligible(self, items: Sequence[int], *, with_rows: bool) -> dict[int, tuple[Any, ...]]:
        """What ranking needs of those ``items`` that pass every hard filter, by rowid;
        ``with_rows``, each followed by its row and keys, read by the same statement."""
        request = self.request
        statement = sql.eligible_items(len(items), with_rows)
        params: list[Any] = [
            *items,
            request.tenant_id,
            request.agent_id,
            request.purpose,
            self.now,
        ]
        if request.subject_id is not None:
            statement += " AND +m.subject_id = ?"
            params.append(request.subject_id)
        if request.kinds:
            kinds = sorted(kind.value for kind in request.kinds)
            statement += f" AND +m.kind IN ({sql.marks(len(kinds))})"
            params += kinds
        return {row[0]: row for row in self.db.query(statement, params)}

    def _frequencies(
        self, items: Sequence[int]
    ) -> tuple[dict[int, dict[int, int]], dict[int, int]]:
        """The query terms' frequencies in each of ``items``, and the items' lengths, from
        their documents."""
        frequencies: dict[int, dict[int, int]] = {}
        lengths: dict[int, int] = {}
        if not items:
            return frequencies, lengths
        terms = set(self.request.terms)
        for item, length, *_, packed_terms, packed_tfs in self.db.query(
            sql.documents(len(items)), items
        ):
            held = unpack(packed_terms, packed_tfs)
            if held is None:  # damaged: no match until a rebuild indexes it again
                continue
            matched = {t: tf for t, tf in held.items() if t in terms}
            if matched:  # an item holding no query term is no match
                frequencies[item] = matched
                lengths[item] = length
        return frequencies, lengths

    def _candidates(self) -> list[Candidate]:
        return [c for c in self.known.values() if c is not None]


__all__ = ["FIRST_ROUND", "Posting", "ScopedSearch"]
