"""What semantic recall costs one search, at 1k and 10k items in a scope.

With semantic recall on, a search reads every vector of its scope that passes the hard
filters, opens each (AES-GCM under its subject's key), takes its cosine to the query's
vector and ranks every lexical match with the nearest items. That work grows with the
scope, whatever the model; the model adds the embedding of the query. So the two are
measured apart, in one run:

- the search itself, lexical only and with semantic recall, over one scope of N items (the
  workload's Zipf sentences of ``bench.workload``, 3-word queries), with an embedder of
  all-MiniLM-L6-v2's size (384 dimensions) that costs nothing, so that its time is the
  store's, the decryption's and the scoring's;
- the model's embedding of one query (the extra's all-MiniLM-L6-v2 on the CPU, over the
  LoCoMo questions), when the extra is installed.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from bench.workload import Workload
from governed_memory import Principal, Scope, Trust, open_service
from governed_memory.ports import Embedder

SIZES = (1_000, 10_000)
QUERIES = 200
DIMENSIONS = 384


class FreeVectors:
    """Deterministic 384-dimensional vectors at no cost: a stand-in of the model's size."""

    name = "free-384"
    dimensions = DIMENSIONS

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        found = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
            rnd = random.Random(seed)
            found.append([rnd.gauss(0.0, 1.0) for _ in range(DIMENSIONS)])
        return found


def _milliseconds(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": round(statistics.median(ordered) * 1e3, 2),
        "p95": round(ordered[int(0.95 * (len(ordered) - 1))] * 1e3, 2),
    }


def _search_times(size: int, embedder: Embedder | None) -> dict[str, float]:
    """p50 and p95 of QUERIES searches in one scope of ``size`` items."""
    folder = tempfile.mkdtemp(prefix="gmem-cost-")
    service = open_service(data_dir=folder, synchronous="OFF", embedder=embedder)
    principal = Principal(
        "bench", "cost", frozenset({Scope.MEMORY_WRITE, Scope.MEMORY_READ}), Trust.TRUSTED
    )
    workload = Workload(seed=7)
    rnd = random.Random(size)
    try:
        for n in range(size):
            item = workload.item(n)
            body = item.body() | {
                "agent_id": "agent",
                "purpose": "cost",
                "subject_id": f"s{n % 50}",
            }
            service.write(principal, body)
        samples = []
        for _ in range(QUERIES):
            search = {
                "agent_id": "agent",
                "purpose": "cost",
                "query": workload.terms(rnd),
                "limit": 10,
            }
            start = time.perf_counter()
            service.search(principal, search)
            samples.append(time.perf_counter() - start)
        return _milliseconds(samples)
    finally:
        service.close()
        shutil.rmtree(folder, ignore_errors=True)


def _query_embedding(questions: Sequence[str]) -> dict[str, float] | None:
    """p50 and p95 of embedding one question with the extra's model, if installed."""
    from governed_memory import semantic

    if semantic.missing() is not None or not questions:
        return None
    model = semantic.MiniLM()
    model.load()
    samples = []
    for question in questions:
        start = time.perf_counter()
        model.embed([question])
        samples.append(time.perf_counter() - start)
    return _milliseconds(samples)


def measure(questions: Sequence[str], sizes: Sequence[int] = SIZES) -> dict[str, Any]:
    """Search times per scope size, lexical and semantic, and the query embedding's."""
    return {
        "queries": QUERIES,
        "sizes": {
            str(size): {
                "lexical": _search_times(size, None),
                "semantic": _search_times(size, FreeVectors()),
            }
            for size in sizes
        },
        "query_embedding": _query_embedding(list(questions)[:100]),
    }
