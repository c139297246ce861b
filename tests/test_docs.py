"""The documentation is true: every example runs and prints what the page shows.

How blocks are run, marked and compared: :mod:`tests.docs` and :mod:`tests.docs.compare`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.docs.blocks import Block, blocks, plan
from tests.docs.compare import differences
from tests.docs.runner import PageRun

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"README.md": ROOT / "README.md"} | {
    f"docs/{path.name}": path for path in sorted((ROOT / "docs").glob("*.md"))
}


def page_blocks(name: str) -> list[Block]:
    return blocks(PAGES[name], name)


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_block_runs_or_says_why_not(name: str) -> None:
    """Each fenced block of the page is run, is the sample of a run, or is marked not-run
    with its reason: an unmarked example cannot slip in untested."""
    assert plan(page_blocks(name)).problems == []


RUNNABLE = sorted(name for name in PAGES if plan(page_blocks(name)).steps)


@pytest.mark.parametrize("name", RUNNABLE)
def test_the_examples_of_a_page_run_and_print_what_it_shows(name: str, tmp_path: Path) -> None:
    """Each example of the page runs in order against a real gmem serve, ends with the
    status it should, and prints what the sample after it shows."""
    failures: list[str] = []
    run = PageRun(tmp_path)
    try:
        for step in plan(page_blocks(name)).steps:
            ran = run.run(step)
            where = step.block.where
            if ran.status != step.status:
                failures.append(
                    f"{where}: exit {ran.status}, not {step.status}\n{ran.out[-2000:]}"
                    f"\n{ran.err[-2000:]}"
                )
                continue
            if step.sample is not None:
                printed = ran.err if step.status else ran.out
                found = differences(step.sample.info, step.sample.code, printed)
                failures.extend(f"{step.sample.where}: {d}" for d in found)
    finally:
        run.close()
    assert not failures, "\n\n".join(failures)


def python_examples() -> list[Block]:
    return [b for name in sorted(PAGES) for b in page_blocks(name) if b.info == "python"]


@pytest.mark.parametrize("block", python_examples(), ids=lambda b: b.where)
def test_a_documented_refusal_fails_when_nothing_is_refused(block: Block) -> None:
    """An example that shows an error with ``try``/``except`` has an ``else`` that raises,
    so it would fail, not pass, if the error were not raised."""
    for node in ast.walk(ast.parse(block.code)):
        if isinstance(node, ast.Try) and node.handlers:
            raises = any(isinstance(n, ast.Raise) for s in node.orelse for n in ast.walk(s))
            assert raises, f"{block.where}+{node.lineno}: try/except without else: raise"


def test_the_comparison_catches_a_false_sample() -> None:
    """The rules that let ids, times and scores vary still catch a wrong number or word:
    the recency 0.05 of a fresh item, a confidence of 0.90 for a capped 0.50."""
    printed = '{"score": 1.49, "score_parts": {"lexical": 0.5, "recency": 0.49999}}'
    assert (
        differences("json", '{"score": 9, "score_parts": {"lexical": 2, "recency": 0.5}}', printed)
        == []
    )
    assert differences(
        "json", '{"score": 9, "score_parts": {"lexical": 2, "recency": 0.05}}', printed
    )
    assert differences("json", '{"score": 9}', printed)  # members left out without "…"
    assert differences("json", '{"score": 9, "…": "…"}', printed) == []
    text = '[memory 1 data-5b231e14eaaf] id="01a23642-60e8-7333-8105-079ec9bc5454" confidence=0.50'
    other = '[memory 1 data-0123456789ab] id="019ad3f2-0000-7000-8000-000000000000" confidence='
    assert differences("text", text, other + "0.50") == []
    assert differences("text", text.replace("0.50", "0.90"), other + "0.50")
    assert differences("json", '{"events": [1, "…", 9]}', '{"events": [1, 2, 3, 9]}') == []
    assert differences("json", '{"events": [1, "…", 9]}', '{"events": [1, 2, 3]}')


SPEC_CITATION = re.compile(r"\bSPEC\s*§")


def test_no_page_cites_the_spec() -> None:
    """Users have no SPEC: no page of the docs cites "SPEC §…"."""
    cited = [
        f"{name}:{n}"
        for name, path in PAGES.items()
        for n, line in enumerate(path.read_text("utf-8").splitlines(), start=1)
        if SPEC_CITATION.search(line)
    ]
    assert cited == []
