"""The seeded workload of SPEC §12, generated deterministically item by item.

1,000 tenants × 5 agents × 3 purposes, 200 subjects per tenant, sentences of 8–30 words
drawn from a 5,000-word vocabulary with Zipf frequencies (exponent 1). Item ``i`` depends
only on the seed and ``i``, so any process can generate any slice of the workload, and the
first 10k items of the 100k store are exactly the 10k store. Queries are three distinct
Zipf-drawn terms inside the (tenant, agent, purpose) scope of a stored item, limit 10.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

PURPOSES = ("support", "sales", "onboarding")
# Working notes live one day by policy; the benchmark runs within minutes, so they stay
# searchable like the other kinds.
KINDS = ("fact", "preference", "skill", "working_note")
KIND_WEIGHTS = (5, 3, 1, 1)
_ONSETS = ("b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("", "", "n", "r", "s", "l")


@dataclass(frozen=True, slots=True)
class Item:
    """One workload item: where it lives and the write body that creates it."""

    index: int
    tenant_id: str
    agent_id: str
    purpose: str
    subject_id: str
    kind: str
    content: str
    confidence: float

    @property
    def memory_id(self) -> str:
        return f"m{self.index:09d}"

    @property
    def scope(self) -> tuple[str, str, str]:
        return (self.tenant_id, self.agent_id, self.purpose)

    def body(self) -> dict[str, Any]:
        """The write body of SPEC §8 that creates this item (trusted, so it is active)."""
        return {
            "id": self.memory_id,
            "agent_id": self.agent_id,
            "subject_id": self.subject_id,
            "purpose": self.purpose,
            "kind": self.kind,
            "content": self.content,
            "provenance": {"source": "bench", "ref": f"item-{self.index}"},
            "trust": "trusted",
            "confidence": self.confidence,
            "expected_version": 0,
        }


@dataclass(frozen=True, slots=True)
class Query:
    """A search inside one scope: three terms, limit 10."""

    tenant_id: str
    agent_id: str
    purpose: str
    text: str

    def body(self) -> dict[str, Any]:
        return {"agent_id": self.agent_id, "purpose": self.purpose, "query": self.text, "limit": 10}


def vocabulary(size: int, seed: int) -> list[str]:
    """``size`` distinct pronounceable lowercase words, the same for the same seed."""
    rnd = random.Random(f"vocabulary:{seed}")
    words: dict[str, None] = {}
    while len(words) < size:
        syllables = rnd.choice((1, 2, 2, 3, 3, 4))
        word = "".join(
            rnd.choice(_ONSETS) + rnd.choice(_VOWELS) + rnd.choice(_CODAS) for _ in range(syllables)
        )
        if len(word) >= 2:
            words.setdefault(word)
    return list(words)


@dataclass(frozen=True)
class Workload:
    """The parameters of SPEC §12; ``single_scope`` puts every item in one scope."""

    seed: int = 20261202
    tenants: int = 1000
    agents: int = 5
    purposes: int = 3
    subjects: int = 200
    vocabulary_size: int = 5000
    zipf_exponent: float = 1.0
    min_words: int = 8
    max_words: int = 30
    single_scope: bool = False
    _cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def describe(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "tenants": 1 if self.single_scope else self.tenants,
            "agents_per_tenant": 1 if self.single_scope else self.agents,
            "purposes": 1 if self.single_scope else self.purposes,
            "subjects_per_tenant": self.subjects,
            "vocabulary": self.vocabulary_size,
            "zipf_exponent": self.zipf_exponent,
            "words_per_sentence": [self.min_words, self.max_words],
            "single_scope": self.single_scope,
        }

    @cached_property
    def words(self) -> list[str]:
        return vocabulary(self.vocabulary_size, self.seed)

    @cached_property
    def _cumulative(self) -> list[float]:
        weights = (1.0 / rank**self.zipf_exponent for rank in range(1, self.vocabulary_size + 1))
        return list(itertools.accumulate(weights))

    def draw(self, rnd: random.Random, k: int) -> list[str]:
        return rnd.choices(self.words, cum_weights=self._cumulative, k=k)

    def item(self, index: int) -> Item:
        """Item ``index`` of the workload (depends only on the seed and the index)."""
        rnd = random.Random(f"{self.seed}:{'single' if self.single_scope else 'item'}:{index}")
        if self.single_scope:
            tenant, agent, purpose = "single", "agent-0", PURPOSES[0]
        else:
            tenant = f"t{rnd.randrange(self.tenants):04d}"
            agent = f"agent-{rnd.randrange(self.agents)}"
            purpose = PURPOSES[rnd.randrange(self.purposes)]
        words = self.draw(rnd, rnd.randint(self.min_words, self.max_words))
        content = " ".join(words).capitalize() + "."
        return Item(
            index=index,
            tenant_id=tenant,
            agent_id=agent,
            purpose=purpose,
            subject_id=f"subject-{rnd.randrange(self.subjects):03d}",
            kind=rnd.choices(KINDS, KIND_WEIGHTS)[0],
            content=content,
            confidence=round(rnd.uniform(0.3, 1.0), 2),
        )

    def items(self, start: int, stop: int, step: int = 1) -> list[Item]:
        return [self.item(i) for i in range(start, stop, step)]

    def query(self, index: int, stored: int) -> Query:
        """Query ``index`` against a store holding items ``0 .. stored-1``.

        The scope is that of a uniformly drawn stored item, so no query hits an empty
        scope (with 15,000 scopes and 10k items, most scopes are empty).
        """
        rnd = random.Random(f"{self.seed}:query:{self.single_scope}:{index}")
        target = self.item(rnd.randrange(stored))
        return Query(target.tenant_id, target.agent_id, target.purpose, self.terms(rnd))

    def terms(self, rnd: random.Random, count: int = 3) -> str:
        """``count`` distinct Zipf-drawn words: the text of a query."""
        terms: list[str] = []
        while len(terms) < count:
            word = self.draw(rnd, 1)[0]
            if word not in terms:
                terms.append(word)
        return " ".join(terms)

    def queries(self, count: int, stored: int, offset: int = 0) -> list[Query]:
        return [self.query(offset + j, stored) for j in range(count)]
