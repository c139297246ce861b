"""Recall@k and hit@k of rankings against evidence, per question, then averaged.

recall@k of a question is the share of its evidence turns among the first k found;
hit@k is 1 when at least one is. Averages are over questions (every question weighs the
same), for categories 1–4 together, for each category, for each conversation (categories
1–4), and for category 5 (adversarial) apart. A question without evidence is left out
of every average and counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.quality.locomo import Conversation

DEPTHS = (5, 10, 20)
MAIN_CATEGORIES = frozenset({1, 2, 3, 4})
ADVERSARIAL = 5


@dataclass(frozen=True, slots=True)
class Outcome:
    """One question's result: where it belongs and what share of its evidence was found."""

    conversation: str
    category: int
    recall: dict[int, float]
    hit10: float


def outcomes(
    conversations: Sequence[Conversation], rankings: dict[str, list[list[str]]]
) -> list[Outcome]:
    """One outcome per question that has evidence."""
    found = []
    for conversation in conversations:
        ranked = rankings[conversation.name]
        for question, ranking in zip(conversation.questions, ranked, strict=True):
            if not question.evidence:
                continue
            evidence = set(question.evidence)
            recall = {k: len(evidence & set(ranking[:k])) / len(evidence) for k in DEPTHS}
            hit = 1.0 if evidence & set(ranking[:10]) else 0.0
            found.append(Outcome(conversation.name, question.category, recall, hit))
    return found


def summary(results: Iterable[Outcome]) -> dict[str, Any]:
    """recall@5/10/20 and hit@10 averaged over ``results``, and how many there were."""
    chosen = list(results)
    n = len(chosen)
    figures: dict[str, Any] = {
        f"recall@{k}": sum(o.recall[k] for o in chosen) / n if n else None for k in DEPTHS
    }
    figures["hit@10"] = sum(o.hit10 for o in chosen) / n if n else None
    figures["questions"] = n
    return figures


def report(results: Sequence[Outcome]) -> dict[str, Any]:
    """The summaries a system is judged on: categories 1–4, each category, each
    conversation (categories 1–4), and category 5 apart."""
    main = [o for o in results if o.category in MAIN_CATEGORIES]
    return {
        "categories_1_4": summary(main),
        "category_5": summary(o for o in results if o.category == ADVERSARIAL),
        "by_category": {
            str(c): summary(o for o in results if o.category == c)
            for c in sorted({o.category for o in results})
        },
        "by_conversation": {
            name: summary(o for o in main if o.conversation == name)
            for name in sorted({o.conversation for o in results})
        },
    }
