"""The systems measured: two BM25 baselines (bm25s), the analyzer prototype, the product.

Each system takes every conversation and returns, per conversation, one ranking per
question: the ids of the turns it found, best first, at most ``depth`` of them.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.quality.lexical import ScopeIndex
from bench.quality.locomo import Conversation
from governed_memory.analysis import Analyzer
from governed_memory.core.retrieval import K1, B
from governed_memory.ports import Embedder

#: conversation name → one ranking (turn ids, best first) per question
Rankings = dict[str, list[list[str]]]
Run = Callable[[Sequence[Conversation], int], Rankings]

BASELINE_K1 = 1.2
BASELINE_B = 0.75
#: The prototype ranks with the product's own parameters (core.retrieval: b 0.3, since a
#: longer memory is seldom a wordier one).
PROTOTYPE_K1 = K1
PROTOTYPE_B = B


@dataclass(frozen=True, slots=True)
class System:
    name: str
    description: str
    run: Run


def bm25s_rankings(conversations: Sequence[Conversation], depth: int, *, stem: bool) -> Rankings:
    """bm25s (Lucene BM25, k1 1.2, b 0.75), its English stopwords (Lucene's 33) removed,
    its default tokenizer (lower-cased words of two or more characters), optionally the
    Snowball English stemmer; one index per conversation."""
    import bm25s
    import Stemmer
    from bm25s.tokenization import Tokenizer

    stemmer = Stemmer.Stemmer("english").stemWord if stem else None
    result: Rankings = {}
    for conversation in conversations:
        tokenizer = Tokenizer(stopwords="en", stemmer=stemmer)
        corpus = tokenizer.tokenize(
            [t.memory for t in conversation.turns], return_as="ids", show_progress=False
        )
        retriever = bm25s.BM25(k1=BASELINE_K1, b=BASELINE_B, method="lucene")
        retriever.index(corpus, show_progress=False)
        queries = tokenizer.tokenize(
            [q.text for q in conversation.questions],
            update_vocab=False,
            return_as="ids",
            show_progress=False,
        )
        k = min(depth, len(conversation.turns))
        rankings = []
        for query in queries:
            if not query:
                rankings.append([])
                continue
            docs, scores = retriever.retrieve([query], k=k, show_progress=False)
            rankings.append(
                [conversation.turns[d].dia_id for d, s in zip(docs[0], scores[0], strict=True) if s]
            )
        result[conversation.name] = rankings
    return result


def prototype_rankings(
    conversations: Sequence[Conversation],
    depth: int,
    *,
    analyzer: Analyzer,
    k1: float,
    b: float,
) -> Rankings:
    """The analyzer's terms ranked by the product's BM25, offline (bench.quality.lexical)."""
    result: Rankings = {}
    for conversation in conversations:
        index = ScopeIndex(
            [(t.dia_id, analyzer.index_terms(t.memory)) for t in conversation.turns], k1=k1, b=b
        )
        result[conversation.name] = [
            index.search(analyzer.query_terms(q.text), depth) for q in conversation.questions
        ]
    return result


def product_rankings(
    conversations: Sequence[Conversation], depth: int, *, embedder: Embedder | None = None
) -> Rankings:
    """The product through its library API: a throwaway SQLite store, every turn written
    as a trusted memory, every question a search of its conversation's scope; with an
    ``embedder``, semantic recall on (the product's own fusion, vectors sealed and stored).

    One agent per conversation makes each conversation its own scope (tenant, agent,
    purpose), so BM25's statistics are the conversation's; the subject is the conversation.
    """
    import governed_memory
    from governed_memory import Principal, Scope, Trust

    folder = tempfile.mkdtemp(prefix="gmem-quality-")
    # Loading speed is no figure here: no fsync per write.
    service = governed_memory.open_service(data_dir=folder, synchronous="OFF", embedder=embedder)
    principal = Principal(
        "locomo", "bench-quality", frozenset({Scope.MEMORY_WRITE, Scope.MEMORY_READ}), Trust.TRUSTED
    )
    try:
        result: Rankings = {}
        for conversation in conversations:
            scope = _scope(conversation)
            for turn in conversation.turns:
                service.write(principal, _write_body(scope, turn.dia_id, turn.memory))
            rankings = []
            for question in conversation.questions:
                body = scope | {"query": question.text[:1000], "limit": min(depth, 100)}
                found = service.search(principal, body)
                rankings.append([hit.item.id.split(".", 1)[1] for hit in found.items])
            result[conversation.name] = rankings
        return result
    finally:
        service.close()
        shutil.rmtree(folder, ignore_errors=True)


def semantic_product_rankings(conversations: Sequence[Conversation], depth: int) -> Rankings:
    """The product with semantic recall on, embedding with the extra's own model."""
    from governed_memory.semantic import MiniLM

    return product_rankings(conversations, depth, embedder=MiniLM())


def _scope(conversation: Conversation) -> dict[str, Any]:
    return {
        "agent_id": f"locomo-{conversation.name}",
        "purpose": "dialogue",
        "subject_id": f"conversation-{conversation.name}",
        "token_budget": 32_000,  # the largest allowed: the budget must not cut the ranking
    }


def _write_body(scope: dict[str, Any], dia_id: str, content: str) -> dict[str, Any]:
    return {
        "id": f"{scope['agent_id']}.{dia_id}",  # the agent holds no "."
        "agent_id": scope["agent_id"],
        "subject_id": scope["subject_id"],
        "purpose": scope["purpose"],
        "kind": "fact",
        "content": content,
        "provenance": {"source": "locomo", "ref": dia_id},
        "trust": "trusted",
        "confidence": 1.0,
        "expected_version": 0,
    }
