"""One quality run: load the conversations, run every system, measure each the same way."""

from __future__ import annotations

import math
import os
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench.quality import semantic
from bench.quality.locomo import Conversation, load
from bench.quality.measure import DEPTHS, outcomes, report
from bench.quality.systems import (
    PROTOTYPE_B,
    PROTOTYPE_K1,
    System,
    bm25s_rankings,
    product_rankings,
    prototype_rankings,
    semantic_product_rankings,
)
from governed_memory.analysis import MAX_TERM_CHARS, Analyzer

SYSTEMS = (
    System(
        "BM25",
        "baseline: bm25s, Lucene BM25 k1 1.2 b 0.75, its English stopwords (Lucene's 33) "
        "removed, lower-cased words of two or more characters",
        partial(bm25s_rankings, stem=False),
    ),
    System(
        "BM25 + stemming",
        "baseline: the same with the Snowball English stemmer (PyStemmer)",
        partial(bm25s_rankings, stem=True),
    ),
    System(
        "analyzer + BM25 (prototype)",
        f"governed_memory.analysis.Analyzer('english') at index and query time, BM25 k1 "
        f"{PROTOTYPE_K1} b {PROTOTYPE_B} over the conversation's items, computed offline "
        "(bench/quality/lexical.py): the product's ranking, without the store around it",
        partial(prototype_rankings, analyzer=Analyzer(), k1=PROTOTYPE_K1, b=PROTOTYPE_B),
    ),
    System(
        "product",
        "governed-memory as it is, default settings, through its library API: a throwaway "
        "SQLite store, each turn written as a trusted memory, each question a search "
        "(limit 20) of its conversation's scope",
        product_rankings,
    ),
)

#: The systems of semantic recall (``--semantic``; they need the semantic extra).
SEMANTIC_SYSTEMS = (
    System(
        "analyzer + BM25 + MiniLM (prototype)",
        "the prototype above fused with all-MiniLM-L6-v2 cosine over the conversation's "
        "items: BM25 + (1 − α)/α · Σ idf·(k1+1) · cosine, α 0.7 (bench/quality/semantic.py)",
        partial(semantic.hybrid_rankings, analyzer=Analyzer(), k1=PROTOTYPE_K1, b=PROTOTYPE_B),
    ),
    System(
        "product + semantic",
        "the product with semantic recall on (GMEM_SEMANTIC=on: the extra's all-MiniLM-L6-v2, "
        "vectors sealed in the store, fused inside the hard filters with the lexical ranks)",
        semantic_product_rankings,
    ),
)


def evaluate(folder: Path, systems: Sequence[System]) -> dict[str, Any]:
    """Every system's figures on the conversations of ``folder``, and what was measured."""
    conversations = load(folder)
    result: dict[str, Any] = {
        "data": _data(folder, conversations),
        "evidence": _evidence(conversations),
        "analyzer": analyzer_speed(conversations),
        "systems": {},
    }
    for system in systems:
        start = time.perf_counter()
        rankings = system.run(conversations, max(DEPTHS))
        seconds = time.perf_counter() - start
        figures = report(outcomes(conversations, rankings))
        result["systems"][system.name] = {
            "description": system.description,
            "seconds": round(seconds, 2),
            **figures,
        }
    return result


def analyzer_speed(conversations: Sequence[Conversation], rounds: int = 3) -> dict[str, Any]:
    """Microseconds to analyze a 100-word text (the turns, cut into 100-word pieces): the
    analyzer at index and at query time, and the tokenizer the product had before it."""
    words = " ".join(t.memory for c in conversations for t in c.turns).split()
    words *= -(-100 // max(len(words), 1))  # at least one text, even from a tiny corpus
    texts = [" ".join(words[i : i + 100]) for i in range(0, len(words) - 99, 100)]
    analyzer = Analyzer()
    timed = {
        "index_terms": analyzer.index_terms,
        "query_terms": analyzer.query_terms,
        "former_terms": _former_terms,
    }
    figures: dict[str, Any] = {"texts": len(texts)}
    for name, function in timed.items():
        best = math.inf
        for _ in range(rounds):
            start = time.perf_counter()
            for text in texts:
                function(text)
            best = min(best, time.perf_counter() - start)
        figures[f"{name}_us_per_100_words"] = round(best / max(len(texts), 1) * 1e6, 1)
    return figures


_FORMER_WORD = re.compile(r"\w+")


def _former_terms(text: str) -> Counter[str]:
    """The tokenizer the product had before the analyzer (NFKC, case-folded ``\\w+``), kept
    here only to measure what the analyzer costs beside it."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return Counter(w for w in _FORMER_WORD.findall(folded) if len(w) <= MAX_TERM_CHARS)


def _shown(folder: Path) -> str:
    """The data folder as the report names it: relative to the checkout where it can be,
    so no machine's own path lands in docs/benchmarks.md."""
    root = Path(__file__).resolve().parents[2]
    try:
        return os.path.relpath(folder.resolve(), root)
    except ValueError:  # another drive (Windows): the name alone
        return folder.name


def _data(folder: Path, conversations: Sequence[Conversation]) -> dict[str, Any]:
    questions = [q for c in conversations for q in c.questions]
    return {
        "folder": _shown(folder),
        "conversations": [c.name for c in conversations],
        "turns": sum(len(c.turns) for c in conversations),
        "questions": len(questions),
        "questions_1_4": sum(1 for q in questions if q.category != 5 and q.evidence),
    }


def _evidence(conversations: Sequence[Conversation]) -> dict[str, Any]:
    repairs = [r for c in conversations for r in c.repairs]
    return {
        "repaired": sum(1 for r in repairs if r.kept),
        "dropped": sum(1 for r in repairs if not r.kept),
        "questions_without_evidence": sum(
            1 for c in conversations for q in c.questions if not q.evidence
        ),
        "entries": [
            {"conversation": r.conversation, "question": r.question, "raw": r.raw, "kept": r.kept}
            for r in repairs
        ],
    }
