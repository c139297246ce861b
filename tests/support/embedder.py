"""A deterministic stand-in for the embedding model of semantic recall.

Words of one concept share a dimension ("car", "automobile" and "vehicle" all point
along the *car* axis), so two texts that share no word can still be near, as with a real
model; every other word lands on a dimension of its own by a stable hash. The vector of a
text is its count of words per dimension. It is an ``Embedder`` for every semantic test
that does not need the real model (fusion, hard filters, erasure, reindex).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

CONCEPTS = {
    "car": ("car", "cars", "automobile", "automobiles", "vehicle", "vehicles"),
    "phone": ("phone", "phones", "telephone", "call", "calls", "ring"),
    "money": ("refund", "refunds", "reimbursement", "money", "payment", "invoice"),
    "pet": ("dog", "dogs", "puppy", "cat", "cats", "kitten"),
}
_AXES = {word: axis for axis, words in enumerate(CONCEPTS.values()) for word in words}
_WORD = re.compile(r"\w+")


class FakeEmbedder:
    """Bag-of-concepts vectors: deterministic, offline, instant."""

    name = "fake-concepts"
    dimensions = 16

    def __init__(self) -> None:
        self.embedded: list[str] = []  # every text embedded, in order (tests read it)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        return [self._vector(text) for text in texts]

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in _WORD.findall(text.casefold()):
            vector[self._axis(word)] += 1.0
        return vector

    def _axis(self, word: str) -> int:
        axis = _AXES.get(word)
        if axis is not None:
            return axis
        spread = self.dimensions - len(CONCEPTS)
        digest = hashlib.sha256(word.encode("utf-8")).digest()
        return len(CONCEPTS) + int.from_bytes(digest[:4], "big") % spread
