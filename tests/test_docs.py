"""The library examples in the documentation run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def examples() -> list[tuple[str, str]]:
    found = []
    for path in sorted(DOCS.glob("*.md")):
        for number, code in enumerate(BLOCK.findall(path.read_text("utf-8")), start=1):
            found.append((f"{path.name}#{number}", code))
    return found


@pytest.mark.parametrize(("where", "code"), examples(), ids=[w for w, _ in examples()])
def test_a_documented_example_runs(
    where: str, code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each ```python block of docs/*.md executes without error."""
    exec(compile(code, where, "exec"), {"__name__": "__docs__"})  # noqa: S102 - our own docs
