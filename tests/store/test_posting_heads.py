"""The heads of postings lists kept in memory between searches are what the database
holds: read in any order of cutoffs, extended, sliced, evicted, or made stale by a write."""

from __future__ import annotations

import random
import secrets
from pathlib import Path

import pytest

from governed_memory.crypto import Keyring
from governed_memory.service import MemoryService
from governed_memory.store.sqlite import SQLiteStore, sql
from governed_memory.store.sqlite import heads as heads_module
from governed_memory.store.sqlite.heads import PostingHeads
from tests.support.fakes import FakeClock, principal
from tests.support.fakes import body as item_body

WRITER = principal()
WORDS = [f"w{i}" for i in range(12)]


def filled(folder: Path, items: int = 80) -> tuple[SQLiteStore, MemoryService]:
    """A scope of items whose words repeat, so each list spans several tfs and lengths."""
    rnd = random.Random(7)
    store = SQLiteStore(folder / "gmem.sqlite3", synchronous="OFF")
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
    for n in range(items):
        words = rnd.choices(WORDS, k=rnd.randint(3, 20))
        service.write(WRITER, item_body(id=f"m{n}", content=" ".join(words)))
    return store, service


def scope_state(store: SQLiteStore) -> tuple[int, int, list[int]]:
    """The scope's id and generation, and its terms."""
    ((scope, generation),) = store.database.query("SELECT id, generation FROM scopes")
    terms = [t for (t,) in store.database.query("SELECT DISTINCT term FROM postings")]
    return scope, generation, terms


def expected(store: SQLiteStore, scope: int, term: int, at: int) -> list[tuple[int, int]]:
    return [tuple(row) for row in store.database.query(sql.HEAD_POSTINGS, (scope, term, at))]


def pairs(read: tuple[memoryview, memoryview]) -> list[tuple[int, int]]:
    impacts, items = read
    return list(zip(impacts, items, strict=True))


def test_a_head_read_in_any_order_of_cutoffs_is_the_list_down_to_the_cutoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a list's head is read at once, extended below what is kept, or cut from a
    deeper head, it holds the list's postings down to the cutoff, in the list's order
    (read from the database a few rows at a time); and a list's first postings are the
    database's first page."""
    monkeypatch.setattr(heads_module, "PAGE", 3)
    store, _ = filled(tmp_path)
    scope, generation, terms = scope_state(store)
    heads = PostingHeads(store.database)
    rnd = random.Random(1)
    for _ in range(200):
        term = rnd.choice(terms)
        impacts = [i for i, _ in store.database.query(sql.HEAD_POSTINGS, (scope, term, 0))]
        at = rnd.choice([0, *impacts, impacts[0] + 1])
        assert pairs(heads.read(scope, generation, term, at)) == expected(store, scope, term, at)
        count = rnd.randint(1, 12)
        first = [tuple(r) for r in store.database.query(sql.FIRST_POSTINGS, (scope, term, count))]
        assert pairs(heads.first(scope, generation, term, count)) == first
    assert heads.held <= heads.budget
    store.close()


def test_the_heads_never_hold_more_than_their_budget(tmp_path: Path) -> None:
    """Past the budget, the least recently read heads go, and a head larger than the
    whole budget is read but not kept; what is read stays exact all the same."""
    store, _ = filled(tmp_path)
    scope, generation, terms = scope_state(store)
    heads = PostingHeads(store.database, budget=120)
    rnd = random.Random(2)
    kept = set()
    for _ in range(200):
        term = rnd.choice(terms)
        at = rnd.choice([0, 1 << 16, 2 << 16, 3 << 16])
        assert pairs(heads.read(scope, generation, term, at)) == expected(store, scope, term, at)
        assert heads.held <= 120
        kept.add(heads.held)
    assert len(kept) > 2  # heads were kept, replaced and evicted
    store.close()


def test_a_head_of_another_generation_is_read_again(tmp_path: Path) -> None:
    """A write moves the scope's generation; a head kept from before it is not used: the
    new item's postings are read."""
    store, service = filled(tmp_path, items=20)
    scope, generation, terms = scope_state(store)
    heads = PostingHeads(store.database)
    before = {term: pairs(heads.read(scope, generation, term, 0)) for term in terms}
    service.write(WRITER, item_body(id="new", content=" ".join(WORDS * 3)))
    scope, moved, terms = scope_state(store)
    assert moved != generation
    for term in terms:
        now = pairs(heads.read(scope, moved, term, 0))
        assert now == expected(store, scope, term, 0)
        assert len(now) == len(before.get(term, [])) + 1
    store.close()
