"""BM25 over one scope, offline: what the product computes, without the store around it.

The formula is the product's (``core.retrieval.rank``): Lucene's IDF, never negative,
``log(1 + (N - df + 0.5) / (df + 0.5))``, times ``tf·(k1+1) / (tf + k1·(1 - b + b·len/avg))``;
the statistics are those of the scope's items; a document's length is the sum of its term
counts, as in ``IndexDoc``; only items sharing a term with the query are candidates, and
ties are broken by id. Hashing terms does not change any of this, so the ranking is the
one the product gives with the same analyzer and parameters (its confidence and recency
parts aside, which are equal for every turn of the benchmark).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence


class ScopeIndex:
    """The postings of one scope's items, and BM25 search over them."""

    def __init__(
        self, docs: Sequence[tuple[str, Counter[str]]], *, k1: float = 1.2, b: float = 0.75
    ) -> None:
        self.ids = [doc_id for doc_id, _ in docs]
        self.k1 = k1
        self.b = b
        self.lengths = [sum(counts.values()) for _, counts in docs]
        self.average = sum(self.lengths) / len(docs) if docs else 1.0
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for index, (_, counts) in enumerate(docs):
            for term, tf in counts.items():
                self.postings.setdefault(term, []).append((index, tf))

    def idf(self, term: str) -> float:
        frequency = len(self.postings.get(term, ()))
        return math.log(1.0 + (len(self.ids) - frequency + 0.5) / (frequency + 0.5))

    def scores(self, terms: Sequence[str]) -> dict[int, float]:
        """BM25 of every item holding at least one of ``terms`` (distinct terms)."""
        k1, b, average = self.k1, self.b, self.average
        scores: dict[int, float] = {}
        for term in dict.fromkeys(terms):
            weight = self.idf(term)
            for index, tf in self.postings.get(term, ()):
                norm = k1 * (1.0 - b + b * self.lengths[index] / average)
                scores[index] = scores.get(index, 0.0) + weight * tf * (k1 + 1.0) / (tf + norm)
        return scores

    def search(self, terms: Sequence[str], k: int) -> list[str]:
        """The ids of the ``k`` best items, best first, ties broken by id."""
        scores = self.scores(terms)
        best = sorted(scores, key=lambda i: (-scores[i], self.ids[i]))[:k]
        return [self.ids[i] for i in best]
