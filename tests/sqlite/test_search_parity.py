"""The pruned top-k search of SQLite returns exactly what the exhaustive reference returns."""

from __future__ import annotations

import random
import secrets
from pathlib import Path

import pytest

from governed_memory.crypto import Keyring
from governed_memory.service import MemoryService
from governed_memory.store.memory import MemoryStore
from governed_memory.store.sqlite import SQLiteStore
from tests.support.fakes import FakeClock, principal, query

WRITER = principal()
WORDS = [f"w{i}" for i in range(40)]


def zipf_sentence(rnd: random.Random) -> str:
    """8-30 words, the first words of the vocabulary far more common than the last."""
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    return " ".join(rnd.choices(WORDS, weights, k=rnd.randint(8, 30)))


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[MemoryService, MemoryService]:
    """The same 600 items, written at varied times and confidences, into both stores."""
    keyring = Keyring(secrets.token_bytes(32))
    clock = FakeClock()
    path: Path = tmp_path_factory.mktemp("parity") / "gmem.sqlite3"
    reference = MemoryService(MemoryStore(), keyring, clock=clock)
    pruned = MemoryService(SQLiteStore(path, synchronous="OFF"), keyring, clock=clock)
    rnd = random.Random(20261202)
    for n in range(600):
        body = {
            "id": f"m{n}",
            "agent_id": "support-bot",
            "subject_id": f"s{n % 7}",
            "purpose": "support",
            "kind": rnd.choice(["fact", "preference"]),
            "content": zipf_sentence(rnd),
            "provenance": {"source": "test", "ref": str(n)},
            "trust": "trusted",
            "confidence": round(rnd.random(), 3),
            "expected_version": 0,
            "ttl_seconds": rnd.choice([3600, 86_400 * 30]),
        }
        reference.write(WRITER, body)
        pruned.write(WRITER, body)
        clock.advance(minutes=rnd.randint(0, 600))
    clock.advance(hours=2)  # the one-hour items are now expired but not swept
    return reference, pruned


def outcome(service: MemoryService, search: dict[str, object]) -> list[tuple[str, float]]:
    found = service.search(WRITER, search)
    return [(hit.item.id, round(hit.score, 9)) for hit in found.items] + [
        ("skipped", found.skipped),
        ("used", found.used_tokens),
    ]


@pytest.mark.parametrize("seed", range(40))
def test_pruned_and_exhaustive_search_agree(
    pair: tuple[MemoryService, MemoryService], seed: int
) -> None:
    """Random 1-3 term queries, limits, budgets and filters give identical results."""
    rnd = random.Random(seed)
    search = query(
        " ".join(rnd.choices(WORDS[:25], k=rnd.randint(1, 3))),
        limit=rnd.choice([1, 3, 10, 50]),
        token_budget=rnd.choice([20, 60, 1000]),
    )
    if rnd.random() < 0.25:
        search["kinds"] = ["preference"]
    if rnd.random() < 0.25:
        search["subject_id"] = f"s{rnd.randint(0, 6)}"
    reference, pruned = pair
    assert outcome(pruned, search) == outcome(reference, search)
