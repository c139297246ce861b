"""The entry of a SQLite search: the scope, its statistics, and small or large, decided once.

Most scopes are small: every posting of the query terms fits in one read of at most
:data:`SMALL_SCOPE_POSTINGS` rows, which also gives each term's document frequency, and the
search is answered from those rows (:meth:`~.top_k.ScopedSearch.small`). A larger scope has
its frequencies counted (cached until the scope's postings change, which bumps its
``generation``) and goes to the threshold algorithm (:meth:`~.top_k.ScopedSearch.large`).
A scope whose cached frequencies already say it is large skips the first read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from governed_memory.core.retrieval import ScopeStatistics
from governed_memory.errors import ReadWouldWait, StoreUnavailable
from governed_memory.records import (
    SEARCH_INDEX,
    SearchMatches,
    SearchRequest,
    serves_index,
)
from governed_memory.store.found import Found
from governed_memory.store.sqlite import sql
from governed_memory.store.sqlite.database import SQLiteDatabase
from governed_memory.store.sqlite.heads import PostingHeads, ScopeHeads
from governed_memory.store.sqlite.threshold import Tier
from governed_memory.store.sqlite.top_k import CHUNK, FIRST_ROUND, Posting, ScopedSearch

#: Up to this many postings of the query terms, a scope is read whole (one statement).
SMALL_SCOPE_POSTINGS = 4 * FIRST_ROUND
#: A search asked not to wait (``Store.prompt``: the HTTP edge's, on its event loop) is
#: made only if its scope's searchable items times its distinct terms, a bound on the
#: postings it can read, is at most this; else it is refused before any posting is read,
#: and made from a worker thread. At this bound a search of common terms costs about
#: 3 ms of CPU at worst (a 250-item scope and 16 terms, 10 results), against 25-100 ms
#: for a 100k scope; the scopes agents search most (tens to hundreds of items, a few
#: terms) are well under it.
PROMPT_POSTINGS = 4_000
#: A search asked for its candidates' rows reads them when it has at most this many times
#: ``want`` candidates (most searches: a scope's search returns those that can rank, but
#: a subject's matches are not pruned ahead); above, none (``Store.
#: rows_with_matches_partial``): reading them all would cost more than reading the few
#: chosen after ranking.
ROWS_WITH_MATCHES = 4
#: How many cached document frequencies are kept before the cache starts afresh.
_CACHE_LIMIT = 100_000


class SQLiteSearch:
    """Searches over the store's database, with a cache of document frequencies."""

    def __init__(self, database: SQLiteDatabase) -> None:
        self._db = database
        #: (scope, term) → (the scope's generation, the term's document frequency).
        self._frequencies: dict[tuple[int, int], tuple[int, int]] = {}
        #: (scope, term) → (the scope's generation, the term's tiers).
        self._tier_cache: dict[tuple[int, int], tuple[int, Sequence[Tier]]] = {}
        #: The heads of large scopes' postings lists read so far (heads.py).
        self.heads = PostingHeads(database)

    def search(self, request: SearchRequest) -> SearchMatches:
        """The matches of ``request``; with ``request.rows``, in one snapshot (this
        thread's, if one is open) with the rows and keys of every candidate, unless there
        are more than ``ROWS_WITH_MATCHES`` times ``want``. They are read with the
        candidates' filters (one statement), and any left out then (a search that
        checked more items than that) in one more statement a chunk of candidates."""
        if not request.rows:
            return self._matches(request, None)
        with self._db.snapshot():
            found = Found(request.tenant_id)
            matches = self._matches(request, found)
            ids = [c.memory_id for c in matches.candidates if c.memory_id not in found.items]
            if request.want is None or len(matches.candidates) > ROWS_WITH_MATCHES * request.want:
                ids = []  # the rows of the few chosen are read after ranking instead
            for start in range(0, len(ids), CHUNK):
                chunk = ids[start : start + CHUNK]
                for row in self._db.query(sql.found_rows(len(chunk)), (request.tenant_id, *chunk)):
                    found.add(tuple(row))
        return replace(matches, found=found.record())

    def _matches(self, request: SearchRequest, found: Found | None) -> SearchMatches:
        rows = self._db.query(
            sql.SCOPE, (SEARCH_INDEX, request.tenant_id, request.agent_id, request.purpose)
        )
        if not rows or not request.terms:  # no scope: nothing to find
            return SearchMatches(ScopeStatistics(0, 0, {}), [])
        scope, documents, total_length, generation, recorded = rows[0]
        terms = list(dict.fromkeys(request.terms))
        if documents * len(terms) > PROMPT_POSTINGS and self._db.prompting:
            raise ReadWouldWait("a search of a large scope is not made at once")
        if not serves_index(recorded, request.index_signature):
            raise StoreUnavailable.index_rebuilt()
        search = ScopedSearch(
            self._db,
            request,
            scope,
            lambda term: self._tiers(scope, generation, term),
            ScopeHeads(self.heads, scope, generation),
            found,
            0 if request.want is None else ROWS_WITH_MATCHES * request.want,
        )
        few = None if self._known_large(scope, generation, terms) else self._few(scope, terms)
        if few is not None:
            counted = Counter(term for term, *_ in few)
            frequency = {term: counted[term] for term in request.terms}
            return search.small(ScopeStatistics(int(documents), int(total_length), frequency), few)
        frequency = {term: self._frequency(scope, generation, term) for term in request.terms}
        return search.large(ScopeStatistics(int(documents), int(total_length), frequency))

    def _known_large(self, scope: int, generation: int, terms: Sequence[int]) -> bool:
        """Whether the cached frequencies, still current, already say the scope is large."""
        cached = [self._frequencies.get((scope, term)) for term in terms]
        return (
            all(c is not None and c[0] == generation for c in cached)
            and sum(c[1] for c in cached if c is not None) > SMALL_SCOPE_POSTINGS
        )

    def _few(self, scope: int, terms: Sequence[int]) -> list[Posting] | None:
        """Every posting of ``terms`` in the scope, in one read, when there are at most
        ``SMALL_SCOPE_POSTINGS`` of them (most scopes); else ``None``.

        A small scope is answered from these rows alone: their count per term is the
        document frequency (expired items still count, as in :meth:`_frequency`), and
        their items are the candidates.
        """
        rows = self._db.query(
            sql.few_postings(len(terms)), (scope, *terms, SMALL_SCOPE_POSTINGS + 1, scope)
        )
        return None if len(rows) > SMALL_SCOPE_POSTINGS else [tuple(row) for row in rows]

    def _tiers(self, scope: int, generation: int, term: int) -> Sequence[Tier]:
        """The term's postings per tf (its tiers: see threshold.py), each with its count
        (0 for tf = 1, never needed) and its best impact; cached like the document
        frequencies. One statement reads the postings of tf ≥ 2 from the index and finds
        the best of tf = 1 in one descent."""
        key = (scope, term)
        cached = self._tier_cache.get(key)
        if cached is not None and cached[0] == generation:
            return cached[1]
        rows = self._db.query(sql.TIERS, (scope, term, scope, term))
        tiers = tuple((int(tf), int(count or 0), int(top)) for tf, count, top in rows if top)
        if len(self._tier_cache) > _CACHE_LIMIT:
            self._tier_cache.clear()
        self._tier_cache[key] = (generation, tiers)
        return tiers

    def _frequency(self, scope: int, generation: int, term: int) -> int:
        """How many searchable items of the scope contain the term (an index-only count),
        cached until the scope's postings change (its generation)."""
        key = (scope, term)
        cached = self._frequencies.get(key)
        if cached is not None and cached[0] == generation:
            return cached[1]
        (count,) = self._db.query(sql.DOCUMENT_FREQUENCY, (scope, term))[0]
        if len(self._frequencies) > _CACHE_LIMIT:
            self._frequencies.clear()
        self._frequencies[key] = (generation, int(count))
        return int(count)


__all__ = ["PROMPT_POSTINGS", "SMALL_SCOPE_POSTINGS", "SQLiteSearch"]
