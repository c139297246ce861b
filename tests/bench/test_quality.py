"""The retrieval-quality benchmark runs end to end on a tiny LoCoMo-shaped fixture.

The fixture is made here, not taken from LoCoMo (the research data stays outside the
repository); nothing here is about how good any system is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench.quality import cost
from bench.quality.locomo import load, normal_id

ROOT = Path(__file__).resolve().parents[2]
SYSTEMS = {"BM25", "BM25 + stemming", "analyzer + BM25 (prototype)", "product"}
SUMMARY = {"recall@5", "recall@10", "recall@20", "hit@10", "questions"}


def qa(question: str, evidence: list[str], category: int) -> dict[str, Any]:
    """A question in LoCoMo's shape (category 5 has an adversarial answer instead)."""
    answer = "adversarial_answer" if category == 5 else "answer"
    return {"question": question, answer: "-", "evidence": evidence, "category": category}


def conversation(a: str, b: str, lines: list[str], qa: list[dict[str, Any]]) -> dict[str, Any]:
    """A conversation in LoCoMo's shape: two sessions of alternating turns, and questions."""
    half = len(lines) // 2
    sessions = {1: lines[:half], 2: lines[half:]}
    data: dict[str, Any] = {"speaker_a": a, "speaker_b": b, "qa": qa}
    for number, texts in sessions.items():
        data[f"session_{number}_date_time"] = f"1:0{number} pm on {number} May, 2023"
        data[f"session_{number}"] = [
            {"speaker": (a, b)[i % 2], "dia_id": f"D{number}:{i + 1}", "text": text}
            for i, text in enumerate(texts)
        ]
    data["session_3_date_time"] = "a session with a date and no turns, as in LoCoMo"
    data["session_1"][1]["blip_caption"] = "a photo of a red bicycle"
    return data


@pytest.fixture(scope="module")
def fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two small conversations, with the kinds of broken evidence ids LoCoMo has."""
    folder = tmp_path_factory.mktemp("locomo")
    first = conversation(
        "Ann",
        "Bo",
        [
            "I adopted a puppy called Rex last week.",
            "Look at my new ride!",
            "I painted a sunrise over the lake.",
            "Did you paint it yourself?",
            "Yes, painting helps me de-stress.",
            "I am moving to Zürich in 2024.",
        ],
        [
            qa("What is the name of Ann's dog?", ["D1:1"], 4),
            qa("What did Bo buy?", ["D1:2"], 1),
            qa("When is Bo moving?", ["D2:03"], 2),
            qa("What did Ann paint?", ["D1:3; D2:2"], 1),
            qa("How does Ann relax?", ["D:2:2", "D"], 3),
            qa("Who is Ann's sister?", ["D9:9"], 5),
            qa("Is Bo kind?", [], 3),
        ],
    )
    second = conversation(
        "Cy",
        "Di",
        ["My e-mail is broken.", "Use email on the phone.", "電話は苦手です", "Me too"],
        [
            qa("What is broken?", ["D1:1"], 4),
            qa("電話", ["D2:1"], 5),
        ],
    )
    for name, data in (("1", first), ("2", second)):
        (folder / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def result(fixture: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The JSON result of ``python -m bench.quality`` on the fixture."""
    output = tmp_path_factory.mktemp("result") / "quality.json"
    markdown = output.with_suffix(".md")
    command = [sys.executable, "-m", "bench.quality", str(fixture), "--json", str(output)]
    subprocess.run(
        [*command, "--markdown", str(markdown), "--semantic", "off"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    found: dict[str, Any] = json.loads(output.read_text(encoding="utf-8"))
    found["markdown"] = markdown.read_text(encoding="utf-8")
    return found


def test_evidence_ids_are_repaired_or_dropped(fixture: Path) -> None:
    """Lists, stray colons and leading zeros are read; ids naming no turn are dropped."""
    first, _ = load(fixture)
    evidence = [q.evidence for q in first.questions]
    assert evidence == [
        ("D1:1",),
        ("D1:2",),
        ("D2:3",),
        ("D1:3", "D2:2"),
        ("D2:2",),
        (),
        (),
    ]
    assert normal_id("D30:05") == ["D30:5"]


def test_a_turn_with_an_image_carries_its_caption(fixture: Path) -> None:
    """A memory is "Speaker: text", plus the caption of a shared image."""
    first, _ = load(fixture)
    assert first.turns[1].memory == "Bo: Look at my new ride! (a photo of a red bicycle)"


def test_every_system_is_measured(result: dict[str, Any]) -> None:
    """The baselines, the prototype and the product each have every figure, between 0 and 1."""
    assert set(result["systems"]) == SYSTEMS
    for figures in result["systems"].values():
        for part in ("categories_1_4", "category_5"):
            assert set(figures[part]) == SUMMARY
        main = figures["categories_1_4"]
        assert main["questions"] == 6  # five in the first conversation, one in the second
        for key in SUMMARY - {"questions"}:
            assert 0.0 <= main[key] <= 1.0
        assert set(figures["by_conversation"]) == {"1", "2"}


def test_the_run_reports_its_data_and_repairs(result: dict[str, Any]) -> None:
    """The result says what was measured and how the evidence was mended."""
    assert result["data"]["turns"] == 10
    assert result["data"]["questions"] == 9
    assert result["evidence"]["repaired"] == 3
    assert result["evidence"]["dropped"] == 2
    assert result["evidence"]["questions_without_evidence"] == 2
    assert result["analyzer"]["index_terms_us_per_100_words"] > 0


def test_the_markdown_has_a_row_per_system(result: dict[str, Any]) -> None:
    """The Markdown section holds one row per system, ready for docs/benchmarks.md."""
    for name in SYSTEMS:
        assert f"| {name} |" in result["markdown"]


def test_the_semantic_systems_are_measured_with_the_extra(fixture: Path, tmp_path: Path) -> None:
    """--semantic on adds the hybrid prototype and the product's own semantic recall, and
    the report weighs it against the default; needs the semantic extra (fails in CI
    without it)."""
    from governed_memory.semantic import missing

    absent = missing()
    if absent is not None:
        reason = f"the semantic extra is not installed ({absent} is missing)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the semantic benchmark test: {reason}")
        pytest.skip(reason)
    output = tmp_path / "quality.json"
    command = [sys.executable, "-m", "bench.quality", str(fixture), "--json", str(output)]
    run = subprocess.run(
        [*command, "--semantic", "on"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    found = json.loads(output.read_text(encoding="utf-8"))
    assert set(found["systems"]) == SYSTEMS | {
        "analyzer + BM25 + MiniLM (prototype)",
        "product + semantic",
    }
    assert "semantic recall ≥ 0.02 above the default" in run.stdout


def test_the_cost_of_semantic_recall_is_measured_per_scope_size() -> None:
    """The cost figures hold p50 and p95 of lexical and semantic searches for each size."""
    figures = cost.measure(["Which car does she drive?"], sizes=(40,))
    lexical, semantic = figures["sizes"]["40"]["lexical"], figures["sizes"]["40"]["semantic"]
    for timing in (lexical, semantic):
        assert 0 < timing["p50"] <= timing["p95"]
    assert figures["query_embedding"] is None or figures["query_embedding"]["p50"] > 0
