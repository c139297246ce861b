"""The README's newcomer commands run as written against a real ``gmem serve``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import free_port, serving

ROOT = Path(__file__).resolve().parents[2]


def newcomer_commands() -> list[str]:
    """The shell commands of the README's 'first authenticated search' section."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Your first authenticated search", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1).strip().splitlines()


def test_the_readme_shows_at_most_three_commands() -> None:
    """A newcomer gets from a running service to a search in at most three commands."""
    commands = newcomer_commands()
    assert 1 <= len(commands) <= 3
    assert "keys create" in commands[0]
    assert "--json" in commands[0]


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's examples use curl")
def test_the_readme_commands_write_and_find_a_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run the README's commands (port and paths adjusted): the search finds the memory."""
    port = free_port()
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    script = "set -eu\n" + "\n".join(
        command.replace("127.0.0.1:8080", f"127.0.0.1:{port}") for command in newcomer_commands()
    )
    data = tmp_path / "gmem-data"
    with serving(data, tmp_path / "server.log", port=port):
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    written, found = (json.loads(line) for line in done.stdout.replace("}{", "}\n{").splitlines())
    assert written["status"] == "active"
    assert [item["id"] for item in found["items"]] == [written["id"]]
