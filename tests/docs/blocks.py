"""Fenced code blocks of a Markdown page, and what the harness does with each."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*doc:\s*([a-z-]+)\s*(?:[—:-]\s*)?(.*?)\s*-->\s*$")
RUN = {"python": "python", "sh": "sh"}
OUTPUT = {"json", "text"}


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and the marker above it."""

    page: str
    line: int
    info: str
    code: str
    section: str
    marker: str | None = None
    argument: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass
class Step:
    """A block that runs, the status it must end with, and the sample of what it prints."""

    block: Block
    kind: str  # python, sh or serves
    status: int = 0
    sample: Block | None = None


@dataclass
class Plan:
    """What the harness does with a page: its steps, and the blocks it cannot place."""

    steps: list[Step] = field(default_factory=list)
    not_run: list[Block] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def blocks(path: Path, name: str) -> list[Block]:
    """Every fenced block of the page, with the section it is in and its marker."""
    found: list[Block] = []
    lines = path.read_text("utf-8").splitlines()
    section, index = "", 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("#"):
            section = line.strip("# ")
        fence = FENCE.match(line)
        if not fence:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        above = lines[index - 1] if index else ""
        marker = MARKER.match(above)
        found.append(
            Block(
                name,
                index + 1,
                fence.group(1),
                "\n".join(lines[index + 1 : end]) + "\n",
                section,
                marker.group(1) if marker else None,
                marker.group(2) if marker else "",
            )
        )
        index = end + 1
    return found


def plan(page: list[Block]) -> Plan:
    """The steps of a page; every block that neither runs, nor shows a run's output, nor
    says why it is not run, is a problem."""
    result = Plan()
    previous: Step | None = None
    for block in page:
        step = _place(block, previous, result)
        previous = step if step is not None else None
    return result


def _place(block: Block, previous: Step | None, result: Plan) -> Step | None:
    if block.marker == "not-run":
        if len(block.argument.split()) < 3:
            result.problems.append(f"{block.where}: not-run needs a reason of a few words")
        result.not_run.append(block)
        return None
    if block.marker == "serves" and block.info == "sh":
        step = Step(block, "serves")
    elif block.marker in (None, "exit") and block.info in RUN:
        status = int(block.argument) if block.marker == "exit" else 0
        step = Step(block, RUN[block.info], status)
    elif block.marker is None and block.info in OUTPUT:
        if (
            previous
            and previous.kind != "serves"
            and previous.sample is None
            and previous.block.section == block.section
        ):
            previous.sample = block
            return None
        result.problems.append(
            f"{block.where}: a {block.info} sample that follows no run block of its section"
        )
        return None
    else:
        result.problems.append(
            f"{block.where}: a ```{block.info} block that neither runs nor says why "
            "(<!-- doc: not-run — reason -->)"
        )
        return None
    result.steps.append(step)
    return step


__all__ = ["Block", "Plan", "Step", "blocks", "plan"]
