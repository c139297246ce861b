"""The threshold search of a large SQLite scope returns exactly what exhaustive scoring
returns, whatever the scope holds and whichever way the lists are cut.

Each scope is generated from a seed: items whose words repeat (so a term's postings spread
over several tiers of tf), confidences and write times drawn from a few values (so scores
tie), items rewritten (their old version superseded), items superseded by another item,
erased, of a forgotten subject, or expired. The reference is the in-memory store, which
scores every match. The threshold method's sizes are shrunk so that these scopes are
searched as a 100k-item scope is: lists cut at their tiers or left unread, a first pass
that hopes for a higher cut, a common level when the tiers are not enough, the met items
returned a few at a time, the lists' heads read from memory, extended or evicted.
"""

from __future__ import annotations

import math
import random
import secrets
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from governed_memory.core.retrieval import K1, STATIC_MAX
from governed_memory.core.values import Trust
from governed_memory.crypto import Keyring
from governed_memory.service import MemoryService
from governed_memory.store.impact import impact, saturation
from governed_memory.store.memory import MemoryStore
from governed_memory.store.sqlite import SQLiteStore, heads, threshold
from tests.support.fakes import FakeClock, principal, query
from tests.support.fakes import body as item_body

WRITER = principal()
ERASER = principal(name="eraser")  # not the writer: a writer may not erase its own items
WORDS = [f"t{i}" for i in range(30)]
SCOPES = 6
QUERIES = 40


def content(rnd: random.Random) -> str:
    """6-40 words, the first of the vocabulary far more common; some words repeated
    up to six times, so a term's frequency in an item ranges over several tiers."""
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    words = rnd.choices(WORDS, weights, k=rnd.randint(6, 30))
    for word in rnd.sample(words, k=min(3, len(words))):
        words += [word] * rnd.randint(0, 5)
    rnd.shuffle(words)
    return " ".join(words)


def scope_pair(seed: int, folder: Path) -> tuple[MemoryService, MemoryService]:
    """The same generated scope in the exhaustive reference and in SQLite."""
    rnd = random.Random(seed)
    keyring, clock = Keyring(secrets.token_bytes(32)), FakeClock()
    reference = MemoryService(MemoryStore(), keyring, clock=clock)
    pruned = MemoryService(
        SQLiteStore(folder / "gmem.sqlite3", synchronous="OFF"), keyring, clock=clock
    )
    pool = [content(rnd) for _ in range(8)]  # some items share their content: ties

    def both(call: Callable[[MemoryService], Any]) -> None:
        call(reference)
        call(pruned)

    versions: dict[str, int] = {}
    subjects: dict[str, str] = {}
    rewritable: list[str] = []  # live for a year, not superseded
    for n in range(rnd.randint(250, 400)):
        rewrite = rewritable and rnd.random() < 0.15
        memory_id = rnd.choice(rewritable) if rewrite else f"m{n}"
        body = {
            "id": memory_id,
            "agent_id": "support-bot",
            "subject_id": subjects.get(memory_id, f"s{rnd.randrange(9)}"),
            "purpose": "support",
            "kind": rnd.choice(["fact", "preference"]),
            "content": rnd.choice(pool) if rnd.random() < 0.2 else content(rnd),
            "provenance": {"source": "test", "ref": str(n)},
            "trust": "trusted",
            "confidence": rnd.choice([0.3, 0.6, 0.9, round(rnd.random(), 2)]),
            "expected_version": versions.get(memory_id, 0),  # a rewrite supersedes it
            "ttl_seconds": 86_400 * 365 if rewrite else rnd.choice([3600, 86_400 * 365]),
        }
        if not rewrite and rewritable and rnd.random() < 0.05:
            target = rnd.choice(rewritable)  # a correction: the target is superseded
            body |= {"supersedes_id": target, "subject_id": subjects[target]}
            rewritable.remove(target)
        both(lambda service, body=body: service.write(WRITER, body))  # type: ignore[misc]
        versions[memory_id] = versions.get(memory_id, 0) + 1
        subjects[memory_id] = body["subject_id"]
        if body["ttl_seconds"] > 3600 and memory_id not in rewritable:
            rewritable.append(memory_id)
        if rnd.random() < 0.3:  # else written at the same instant as the previous one
            clock.advance(minutes=rnd.choice([1, 60, 600]))
    for memory_id in rnd.sample(sorted(versions), k=len(versions) // 15):
        both(lambda service, memory_id=memory_id: service.erase(ERASER, memory_id))  # type: ignore[misc]
    both(lambda service: service.forget_subject(ERASER, "s8"))
    clock.advance(hours=2)  # the one-hour items are now expired but not swept
    return reference, pruned


def searches(seed: int) -> Iterator[dict[str, Any]]:
    rnd = random.Random(-seed)
    for _ in range(QUERIES):
        search = query(
            " ".join(rnd.sample(WORDS[:20], k=rnd.randint(1, 4))),
            limit=rnd.choice([1, 3, 10, 25]),
            token_budget=rnd.choice([60, 10_000]),
        )
        if rnd.random() < 0.25:
            search["kinds"] = ["preference"]
        if rnd.random() < 0.15:
            search["subject_id"] = f"s{rnd.randrange(9)}"
        yield search


def outcome(service: MemoryService, search: dict[str, Any]) -> list[tuple[str, float]]:
    found = service.search(WRITER, search)
    return [(hit.item.id, round(hit.score, 9)) for hit in found.items] + [
        ("skipped", found.skipped),
        ("used", found.used_tokens),
    ]


@pytest.fixture
def small_sizes(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The threshold method's sizes shrunk to these scopes', and a count of the ways the
    lists were read (so the test shows it went through each of them)."""
    monkeypatch.setattr(threshold, "WHOLE_LIST", 8)
    monkeypatch.setattr(threshold, "SHORT_HEAD", 4)
    monkeypatch.setattr(threshold, "FIRST_PAGE", 3)
    monkeypatch.setattr(threshold, "_FIRST_SCORED", 1)
    monkeypatch.setattr(threshold, "HOPE_READ", 12)
    monkeypatch.setattr(threshold, "_MET_PAGE", 6)
    monkeypatch.setattr(threshold, "CHUNK", 4)
    monkeypatch.setattr(threshold, "STEP", 2)
    seen: Counter[str] = Counter()
    plan, hope, met = (
        threshold.ThresholdSearch._plan,
        threshold.ThresholdSearch._hope,
        threshold.ThresholdSearch._met,
    )

    def counted_plan(self: threshold.ThresholdSearch, *args: Any) -> Any:
        lists, read = plan(self, *args)
        seen["common level" if read == float("inf") else "tiers"] += 1
        seen.update("unread" for _, _, at, _ in lists if at >= 1 << 62)
        return lists, read

    def counted_hope(self: threshold.ThresholdSearch, *args: Any) -> Any:
        seen["hope"] += 1
        return hope(self, *args)

    def counted_met(self: threshold.ThresholdSearch, *args: Any) -> Any:
        rows = met(self, *args)
        seen["page full" if len(rows) == args[2] else "page"] += 1
        return rows

    monkeypatch.setattr(threshold.ThresholdSearch, "_plan", counted_plan)
    monkeypatch.setattr(threshold.ThresholdSearch, "_hope", counted_hope)
    monkeypatch.setattr(threshold.ThresholdSearch, "_met", counted_met)
    return seen


@pytest.mark.parametrize("kept", [None, 80], ids=["heads kept", "heads mostly evicted"])
def test_the_threshold_search_ranks_exactly_as_exhaustive_scoring(
    tmp_path: Path, small_sizes: Counter[str], monkeypatch: pytest.MonkeyPatch, kept: int | None
) -> None:
    """Across generated scopes (ties, rewrites, supersessions, erasures, a forgotten
    subject, expired items) and queries (1-4 terms, limits, budgets, kind and subject
    filters), the SQLite search returns the reference's items, scores and budget use,
    whether the lists' heads stay in memory between searches or few of them fit."""
    if kept is not None:
        monkeypatch.setattr(heads, "HEADS_BUDGET", kept)
    for seed in range(SCOPES):
        reference, pruned = scope_pair(seed, tmp_path / f"scope{seed}")
        for search in searches(seed):
            assert outcome(pruned, search) == outcome(reference, search), (seed, search)
        pruned.store.close()
    # Every way of reading the lists was taken, so every one of them was checked.
    assert {"tiers", "common level", "unread", "hope", "page", "page full"} <= set(small_sizes)


def test_writes_between_searches_leave_no_stale_bound(
    tmp_path: Path, small_sizes: Counter[str]
) -> None:
    """The tiers bound what each cut leaves unread and are kept between searches until the
    scope changes: after rounds of searches, new items (one with a term repeated more often
    than any before: a new top tier), rewrites and erasures, the SQLite search still
    returns the reference's items, scores and budget use."""
    for seed in range(2):
        reference, pruned = scope_pair(seed, tmp_path / f"scope{seed}")
        rnd = random.Random(1000 + seed)
        for round_ in range(4):
            for search in searches(seed + round_):
                assert outcome(pruned, search) == outcome(reference, search), (seed, search)
            word = rnd.choice(WORDS[:5])
            changes = [
                {"id": f"new{round_}", "content": " ".join([word] * (12 + round_))},
                {"id": f"new{round_}b", "content": content(rnd)},
            ]
            for change in changes:
                for service in (reference, pruned):
                    service.write(WRITER, item_body(subject_id="s0", **change))
            if round_ % 2:
                for service in (reference, pruned):
                    service.erase(ERASER, f"new{round_ - 1}")
        pruned.store.close()


def test_every_change_of_a_scopes_postings_moves_its_generation(tmp_path: Path) -> None:
    """The cached tiers and document frequencies are keyed by the scope's generation, so
    every change of its postings must move it: a write, a rewrite, a promotion, an erasure,
    a forget, an expiry and a rebuild that repairs a posting each do."""
    clock = FakeClock()
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="OFF")
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=clock)
    reviewer = principal(name="reviewer")

    def generation() -> int:
        with closing(sqlite3.connect(tmp_path / "gmem.sqlite3")) as db:
            ((value,),) = db.execute("SELECT generation FROM scopes").fetchall()
        return int(value)

    def lost_posting() -> None:
        with closing(sqlite3.connect(tmp_path / "gmem.sqlite3")) as db, db:
            db.execute(
                "DELETE FROM postings WHERE (scope, term, impact, item) = "
                "(SELECT scope, term, impact, item FROM postings LIMIT 1)"
            )

    service.write(WRITER, item_body(id="a", content="t1 t1 t2"))
    untrusted = principal(name="agent", trust=Trust.UNTRUSTED)
    # (what changes the postings, what comes first without being the change itself)
    changes: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("write", lambda: None, lambda: service.write(WRITER, item_body(id="b", content="t1"))),
        (
            "rewrite",
            lambda: None,
            lambda: service.write(
                WRITER, item_body(id="a", content="t1 t1 t1 t3", expected_version=1)
            ),
        ),
        (
            "promotion",
            lambda: service.write(untrusted, item_body(id="c", content="t1 t4", trust="untrusted")),
            lambda: service.promote(reviewer, "c", expected_version=1),
        ),
        ("erasure", lambda: None, lambda: service.erase(ERASER, "b")),
        (
            "forget",
            lambda: service.write(WRITER, item_body(id="d", content="t1", subject_id="s9")),
            lambda: service.forget_subject(ERASER, "s9"),
        ),
        (
            "expiry",
            lambda: (
                service.write(WRITER, item_body(id="e", content="t1", ttl_seconds=60)),
                clock.advance(minutes=5),
            ),
            service.expire_due,
        ),
        # a rebuild writes only what differs: here, the posting deleted behind its back
        ("rebuild", lost_posting, service.maintenance.rebuild),
    ]
    for name, before_it, change in changes:
        before_it()
        before = generation()
        change()
        assert generation() > before, name
    store.close()


class _Heads:
    """Lists' heads held as given: (impacts, items) of every posting, best first."""

    def __init__(self, lists: dict[int, list[tuple[int, int]]]) -> None:
        self.lists = lists

    def read(self, term: int, at: int) -> tuple[list[int], list[int]]:
        postings = [(value, item) for value, item in self.lists[term] if value >= at]
        return [value for value, _ in postings], [item for _, item in postings]


def _search(
    weights: dict[int, float],
    average: float,
    tiers: dict[int, list[tuple[int, int, int]]],
    heads_: _Heads,
) -> threshold.ThresholdSearch:
    """A threshold search over lists held in memory (nothing read from a database)."""
    return threshold.ThresholdSearch(
        None,  # type: ignore[arg-type]
        1,
        weights,
        average,
        0,
        None,
        tiers.__getitem__,
        heads_,  # type: ignore[arg-type]
    )


def test_an_item_is_bounded_by_what_each_list_leaves_unread_at_its_length() -> None:
    """An item met in one list can gain, from each list it was not met in, at most that
    list's largest unread tf at the item's own length (never more than the list's bound):
    summed list by list, not the lists' bounds scaled by the largest of their shares. So a
    long item met only in a rare term's list is bounded under the cut and never scored."""
    average = 20.0
    rare, b_term, c_term = 1, 2, 3
    weights = {rare: 3.0, b_term: 1.0, c_term: 0.5}
    cap = {term: weight * (K1 + 1.0) for term, weight in weights.items()}
    short, long_ = 2, 60  # item 10 is short, item 11 long; both hold the rare term once
    heads_ = _Heads(
        {
            rare: [(impact(1, short), 10), (impact(1, long_), 11)],
            b_term: [(impact(3, 5), 20), (impact(2, 5), 21)],  # cut above tf 1
            c_term: [(impact(4, 5), 30), (impact(3, 5), 31)],  # cut above tf 2
        }
    )
    tiers = {
        rare: [(1, 0, impact(1, short))],
        b_term: [(3, 1, impact(3, 5)), (2, 1, impact(2, 5)), (1, 0, impact(1, short))],
        c_term: [(4, 1, impact(4, 5)), (3, 1, impact(3, 5)), (2, 5, impact(2, short))],
    }
    # What each cut leaves unread is bounded by its best posting: tf 1 and tf 2, short.
    bound_b = cap[b_term] * saturation(1, short, average)
    bound_c = cap[c_term] * saturation(2, short, average)
    lists = [
        (rare, weights[rare], 0, 0.0),  # read whole
        (b_term, weights[b_term], impact(2, 65535), bound_b),
        (c_term, weights[c_term], impact(3, 65535), bound_c),
    ]
    search = _search(weights, average, tiers, heads_)
    met = dict(search._met(lists, -math.inf, 100))

    def expected(length: int) -> float:
        return (
            STATIC_MAX
            + cap[rare] * saturation(1, length, average)
            + min(bound_b, cap[b_term] * saturation(1, length, average))
            + min(bound_c, cap[c_term] * saturation(2, length, average))
        )

    assert met[10] == pytest.approx(expected(short), abs=1e-12)
    assert met[11] == pytest.approx(expected(long_), abs=1e-12)
    # The lists' bounds scaled by the largest share would let the long item compete.
    shares = max(
        cap[b_term] * saturation(1, long_, average) / bound_b,
        cap[c_term] * saturation(2, long_, average) / bound_c,
    )
    scaled = STATIC_MAX + cap[rare] * saturation(1, long_, average) + (bound_b + bound_c) * shares
    assert met[11] < scaled - 1e-3
    cut = (met[11] + scaled) / 2
    assert 11 not in dict(search._met(lists, cut, 100))


def test_an_item_met_in_several_lists_adds_only_what_the_others_leave_unread() -> None:
    """An item met in two lists has its parts there; from a list left unread it can gain
    at most that list's largest tf at its length, and from a list cut at a common level
    inside its tf = 1 tier at most that list's bound (the best posting below the cut)."""
    average = 20.0
    a_term, b_term, c_term, d_term = 1, 2, 3, 4
    weights = {a_term: 2.0, b_term: 1.0, c_term: 0.7, d_term: 0.4}
    cap = {term: weight * (K1 + 1.0) for term, weight in weights.items()}
    heads_ = _Heads(
        {
            a_term: [(impact(1, 10), 10), (impact(1, 40), 11)],  # read whole
            b_term: [(impact(3, 10), 10), (impact(2, 5), 21)],  # cut above tf 1
            c_term: [(impact(2, 3), 30)],  # left unread
            d_term: [(impact(2, 5), 40), (impact(1, 20), 41)],  # read down to tf 1, length 30
        }
    )
    tiers = {
        a_term: [(1, 0, impact(1, 10))],
        b_term: [(3, 1, impact(3, 10)), (2, 1, impact(2, 5)), (1, 0, impact(1, 2))],
        c_term: [(2, 4, impact(2, 3)), (1, 0, impact(1, 2))],
        d_term: [(2, 1, impact(2, 5)), (1, 0, impact(1, 2))],
    }
    bound_b = cap[b_term] * saturation(1, 2, average)
    bound_c = cap[c_term] * saturation(2, 3, average)  # its best posting: unread
    bound_d = cap[d_term] * saturation(1, 31, average)  # the best below the common level
    lists = [
        (a_term, weights[a_term], 0, 0.0),
        (b_term, weights[b_term], impact(2, 65535), bound_b),
        (c_term, weights[c_term], 1 << 62, bound_c),
        (d_term, weights[d_term], impact(1, 30), bound_d),
    ]
    search = _search(weights, average, tiers, heads_)
    met = dict(search._met(lists, -math.inf, 100))
    length = 10
    expected = (
        STATIC_MAX
        + cap[a_term] * saturation(1, length, average)
        + cap[b_term] * saturation(3, length, average)
        + cap[c_term] * saturation(2, length, average)  # under bound_c: a longer item
        + bound_d  # under what tf 1 at length 10 would add: the list's bound caps it
    )
    assert cap[d_term] * saturation(1, length, average) > bound_d
    assert met[10] == pytest.approx(expected, abs=1e-12)
    # Met in one list only, the same rule: item 21 (length 5, tf 2 in b).
    only_b = (
        STATIC_MAX
        + cap[b_term] * saturation(2, 5, average)
        + cap[c_term] * saturation(2, 5, average)
        + bound_d
    )
    assert met[21] == pytest.approx(only_b, abs=1e-12)
