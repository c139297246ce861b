"""The pruned top-k search of SQLite returns exactly what the exhaustive reference returns."""

from __future__ import annotations

import random
import secrets
from pathlib import Path

import pytest

from governed_memory.core.retrieval import CONFIDENCE_WEIGHT
from governed_memory.crypto import Keyring
from governed_memory.records import SearchMatches, SearchRequest
from governed_memory.service import MemoryService, retrieval
from governed_memory.store.memory import MemoryStore
from governed_memory.store.sqlite import SQLiteStore, threshold
from governed_memory.store.sqlite import search as sqlite_search
from tests.support.fakes import FakeClock, principal, query

WRITER = principal()
_BODY = {
    "agent_id": "support-bot",
    "subject_id": "s1",
    "purpose": "support",
    "kind": "fact",
    "content": "shared word",
    "provenance": {"source": "test", "ref": "a"},
    "trust": "trusted",
    "expected_version": 0,
}
WORDS = [f"w{i}" for i in range(40)]


def zipf_sentence(rnd: random.Random) -> str:
    """8-30 words, the first words of the vocabulary far more common than the last."""
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    return " ".join(rnd.choices(WORDS, weights, k=rnd.randint(8, 30)))


#: Where the 600 items go: one large scope (the threshold algorithm reads its lists best
#: first), 30 scopes of about 20 items (each read whole and ranked on its postings), or
#: the same 30 scopes where items are written in bursts at one instant with a handful of
#: confidences, so that many scores tie exactly; or one large scope of six contents, where
#: relevance ties in large groups and only confidence and recency (at most 0.15 together)
#: order each group, so the threshold algorithm's bounds are decided by the static parts.
LAYOUTS = {
    "one scope": (1, False),
    "small scopes": (30, False),
    "ties": (30, True),
    "one scope, ties": (1, True),
}


@pytest.fixture(scope="module", params=sorted(LAYOUTS))
def pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[MemoryService, MemoryService]:
    """The same 600 items, written at varied times and confidences, into both stores."""
    purposes, ties = LAYOUTS[request.param]
    keyring = Keyring(secrets.token_bytes(32))
    clock = FakeClock()
    path: Path = tmp_path_factory.mktemp("parity") / "gmem.sqlite3"
    reference = MemoryService(MemoryStore(), keyring, clock=clock)
    pruned = MemoryService(SQLiteStore(path, synchronous="OFF"), keyring, clock=clock)
    rnd = random.Random(20261202)
    pool = [zipf_sentence(rnd) for _ in range(6)]  # ties: few distinct contents
    for n in range(600):
        body = {
            "id": f"m{n}",
            "agent_id": "support-bot",
            "subject_id": f"s{n % 7}",
            "purpose": "support" if purposes == 1 else f"p{n % purposes}",
            "kind": rnd.choice(["fact", "preference"]),
            "content": rnd.choice(pool) if ties else zipf_sentence(rnd),
            "provenance": {"source": "test", "ref": str(n)},
            "trust": "trusted",
            "confidence": rnd.choice([0.5, 0.9]) if ties else round(rnd.random(), 3),
            "expected_version": 0,
            "ttl_seconds": rnd.choice([3600, 86_400 * 365]),
        }
        reference.write(WRITER, body)
        pruned.write(WRITER, body)
        if not ties or n % 50 == 49:
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
    purposes = sorted({item.purpose for item in reference.store.tenant_items("acme")})
    search["purpose"] = purposes[seed % len(purposes)]
    assert outcome(pruned, search) == outcome(reference, search)


@pytest.mark.parametrize("seed", range(40))
def test_the_threshold_algorithm_is_exact_when_it_reads_lists_only_in_part(
    pair: tuple[MemoryService, MemoryService], seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With tiny limits, the lists of these 600 items are read as a 100k-item scope's are:
    long lists left unread or read through their heads (or down to a common level when
    the heads are not enough), few items from the first pages, the met items returned a
    handful at a time. The answers are still exactly the reference's."""
    monkeypatch.setattr(threshold, "WHOLE_LIST", 6)
    monkeypatch.setattr(threshold, "SHORT_HEAD", 3)
    monkeypatch.setattr(threshold, "FIRST_PAGE", 4)
    monkeypatch.setattr(threshold, "_MET_PAGE", 5)
    test_pruned_and_exhaustive_search_agree(pair, seed)


def test_a_small_scope_is_ranked_on_its_postings_and_only_contenders_are_read(
    tmp_path: Path,
) -> None:
    """Forty items in one scope, one query term: the store reads the scope's postings in
    one statement and materializes only the items that can make the first places."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="OFF")
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
    for n in range(40):
        service.write(
            WRITER,
            {
                "id": f"m{n}",
                "agent_id": "support-bot",
                "subject_id": "s1",
                "purpose": "support",
                "kind": "fact",
                "content": f"shared word number {n}",
                "provenance": {"source": "test", "ref": str(n)},
                "trust": "trusted",
                "confidence": n / 40,
                "expected_version": 0,
            },
        )
    statements: list[str] = []
    read = store.database.query

    def spy(sql: str, params: object = ()) -> list[object]:
        statements.append(sql)
        return read(sql, params)  # type: ignore[arg-type]

    store.database.query = spy  # type: ignore[method-assign]
    found = service.search(WRITER, query("shared", limit=3))
    assert [hit.item.id for hit in found.items] == ["m39", "m38", "m37"]
    posting_reads = [sql for sql in statements if "FROM postings" in sql]
    assert len(posting_reads) == 1  # no count per term, no second read of the lists
    (collect,) = [sql for sql in statements if sql.startswith("SELECT m.rowid, m.id")]
    assert collect.count("?") < 40  # the contenders' rowids, not all forty items


@pytest.mark.parametrize(
    ("others", "their_confidence"),
    [(2, 0.1), (5, 0.9)],  # five tying with "a" (ranked first by id) are all candidates
    ids=["rows with the matches", "rows after ranking"],
)
def test_a_write_between_the_reads_of_a_search_does_not_mix_two_states(
    tmp_path: Path, others: int, their_confidence: float
) -> None:
    """A search reads postings, then rows, then keys: all from one snapshot, whether the
    rows come with the matches (at most four candidates for one hit) or are read after
    ranking (more). A rewrite landing after the postings were read neither changes the
    ranked item under the search nor hides the item that should have come first."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="OFF")
    clock = FakeClock()
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=clock)
    rest = [(f"o{n}", their_confidence) for n in range(others)]
    for memory_id, confidence in (("a", 0.9), ("b", 0.8), *rest):
        provenance = {"source": "test", "ref": memory_id}
        service.write(
            WRITER,
            {**_BODY, "id": memory_id, "provenance": provenance, "confidence": confidence},
        )
    read = store.database.query
    rewritten: list[bool] = []

    def rewrite_after_the_postings(sql: str, params: object = ()) -> list[object]:
        rows = read(sql, params)  # type: ignore[arg-type]
        if "FROM postings" in sql and not rewritten:
            rewritten.append(True)
            service.write(WRITER, {**_BODY, "id": "a", "confidence": 0.05, "expected_version": 1})
        return rows

    store.database.query = rewrite_after_the_postings  # type: ignore[method-assign]
    found = service.search(WRITER, query("shared", limit=1))
    assert rewritten  # the write did land in the middle of the search
    (hit,) = found.items
    assert (hit.item.id, hit.item.version, hit.item.confidence) == ("a", 1, 0.9)
    assert hit.score_parts["confidence"] == CONFIDENCE_WEIGHT * 0.9  # ranked on the state read
    store.database.query = read  # type: ignore[method-assign]
    (after,) = service.search(WRITER, query("shared", limit=1)).items
    assert after.item.id == ("b" if their_confidence < 0.8 else "o0")  # it sees the rewrite


def test_an_item_lifted_by_its_static_parts_is_not_pruned(tmp_path: Path) -> None:
    """In a large scope, the best item holds only the common query term and wins by its
    confidence and recency (0.15 together) over an older item holding the rare term: the
    rare term's part alone beats what the common term can add, so only the static parts'
    bound makes the threshold algorithm read the common term's list and find the winner,
    on SQLite as in the exhaustive reference. (The sizes put the rare term's part between
    the common term's bound and that bound plus 0.15.)"""
    keyring, clock = Keyring(secrets.token_bytes(32)), FakeClock()
    reference = MemoryService(MemoryStore(), keyring, clock=clock)
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="OFF")
    pruned = MemoryService(store, keyring, clock=clock)

    def write(memory_id: str, content: str, confidence: float) -> None:
        body = {
            "id": memory_id,
            "agent_id": "support-bot",
            "subject_id": "s1",
            "purpose": "support",
            "kind": "fact",
            "content": content,
            "provenance": {"source": "test", "ref": memory_id},
            "trust": "trusted",
            "confidence": confidence,
            "expected_version": 0,
            "ttl_seconds": 730 * 86_400,
        }
        reference.write(WRITER, body)
        pruned.write(WRITER, body)

    for n in range(50):
        write(f"other{n:03d}", "cword", 0.0)
    for n in range(180):
        write(f"common{n:03d}", "bword", 0.0)
    write("rare", "aword" + " z" * 73, 0.0)
    clock.advance(days=700)
    write("lifted", " ".join(["bword"] * 50), 1.0)
    search = query("aword bword", limit=1)
    found = reference.search(WRITER, search | {"limit": 2}).items
    assert [hit.item.id for hit in found] == ["lifted", "rare"]
    assert found[0].score_parts["lexical"] < found[1].score_parts["lexical"]
    assert outcome(pruned, search) == outcome(reference, search)
    store.close()


def _subject_pair(tmp_path: Path, items: int) -> tuple[MemoryService, MemoryService]:
    """``items`` items of one subject in one scope (many tying exactly: a handful of
    contents and confidences, written in bursts), and as many of other subjects, in both
    stores."""
    keyring, clock = Keyring(secrets.token_bytes(32)), FakeClock()
    reference = MemoryService(MemoryStore(), keyring, clock=clock)
    pruned = MemoryService(
        SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="OFF"), keyring, clock=clock
    )
    rnd = random.Random(20261204)
    pool = [zipf_sentence(rnd) for _ in range(5)]
    for n in range(2 * items):
        body = {
            "id": f"m{n}",
            "agent_id": "support-bot",
            "subject_id": "s0" if n % 2 == 0 else f"s{1 + n % 5}",
            "purpose": "support",
            "kind": "fact",
            "content": rnd.choice(pool),
            "provenance": {"source": "test", "ref": str(n)},
            "trust": "trusted",
            "confidence": rnd.choice([0.5, 0.9]),
            "expected_version": 0,
        }
        reference.write(WRITER, body)
        pruned.write(WRITER, body)
        if n % 20 == 19:
            clock.advance(minutes=rnd.randint(1, 600))
    return reference, pruned


@pytest.mark.parametrize("chunk", [500, 7])
@pytest.mark.parametrize("seed", range(12))
def test_a_subject_s_many_matches_are_ranked_without_their_rows(
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    chunk: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A subject's matches are all candidates (not pruned ahead). Up to four times
    ``want`` of them, the store reads their rows with them (a chunk of candidates at a
    time); more, none, and the few chosen are read after ranking, in the same snapshot.
    Limits, tight budgets and ties give exactly the reference's hits, scores and skips."""
    monkeypatch.setattr(sqlite_search, "CHUNK", chunk)
    reference, pruned = _subject_pair(tmp_path_factory.mktemp("subject"), 60)
    rnd = random.Random(seed)
    search = query(
        " ".join(rnd.choices(WORDS[:8], k=rnd.randint(1, 3))),
        limit=rnd.choice([1, 3, 10]),
        token_budget=rnd.choice([5, 20, 60, 1000]),
        subject_id="s0",
    )
    answers: list[SearchMatches] = []
    store = pruned.store
    real = store.search
    monkeypatch.setattr(store, "search", lambda asked: answers.append(real(asked)) or answers[-1])

    assert outcome(pruned, search) == outcome(reference, search)
    (answer,) = answers  # complete: no walk further down
    assert answer.complete and answer.found is not None
    many = len(answer.candidates) > sqlite_search.ROWS_WITH_MATCHES * search["limit"]
    assert set(answer.found.items) == (set() if many else {c.memory_id for c in answer.candidates})


def test_a_subject_s_items_that_match_no_term_are_not_read_as_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large scope's subject search checks every item of the subject; the rows and keys
    it returns with the matches are those of its candidates, not of the subject's items
    that hold no query term."""
    monkeypatch.setattr(sqlite_search, "SMALL_SCOPE_POSTINGS", 2)  # the scope is large
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="OFF")
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=FakeClock())
    for n in range(4):
        service.write(WRITER, {**_BODY, "id": f"other-{n}", "content": "shared word"})
    service.write(WRITER, {**_BODY, "id": "match", "subject_id": "s0"})
    for n in range(2):
        service.write(
            WRITER, {**_BODY, "id": f"no-match-{n}", "subject_id": "s0", "content": "else"}
        )
    answers: list[SearchMatches] = []
    real = store.search
    monkeypatch.setattr(store, "search", lambda asked: answers.append(real(asked)) or answers[-1])

    hits = service.search(WRITER, query("shared", subject_id="s0")).items

    assert [hit.item.id for hit in hits] == ["match"]
    (answer,) = answers
    assert [c.memory_id for c in answer.candidates] == ["match"]
    assert answer.found is not None
    assert set(answer.found.items) == {"match"}
    assert set(answer.found.item_keys) == {"match"}
    store.close()


def test_a_search_inside_a_snapshot_reads_its_rows_in_that_snapshot(tmp_path: Path) -> None:
    """A store search asked for rows inside a snapshot already open shares it: the rows
    come from the state the snapshot began with, and the snapshot ends as it would."""
    store = SQLiteStore(tmp_path / "gmem.sqlite3", synchronous="OFF")
    clock = FakeClock()
    service = MemoryService(store, Keyring(secrets.token_bytes(32)), clock=clock)
    service.write(WRITER, {**_BODY, "id": "a", "confidence": 0.9})
    request = SearchRequest(
        "acme",
        "support-bot",
        "support",
        list(service.index_doc("acme", "shared").terms),
        clock.now(),
        want=10,
        rows=True,
    )
    with store.snapshot():
        before = store.search(request)
        service.write(WRITER, {**_BODY, "id": "a", "confidence": 0.1, "expected_version": 1})
        during = store.search(request)
    after = store.search(request)

    assert before.found is not None and during.found is not None and after.found is not None
    assert during.found.items["a"].confidence == before.found.items["a"].confidence == 0.9
    assert after.found.items["a"].confidence == 0.1


def test_a_budget_walk_never_asks_past_the_places_it_looks_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A budget that skips everything walks down the ranking (each round asks for four
    times as many places) but never asks the store for more than ``MAX_BUDGET_WALK``."""
    monkeypatch.setattr(retrieval, "MAX_BUDGET_WALK", 30)
    _, pruned = _subject_pair(tmp_path, 60)
    wants: list[int | None] = []
    store = pruned.store
    real = store.search
    monkeypatch.setattr(store, "search", lambda asked: wants.append(asked.want) or real(asked))

    found = pruned.search(WRITER, query(" ".join(WORDS[:3]), token_budget=1))

    assert found.items == [] and found.skipped > 0
    assert wants == [10, 30]
