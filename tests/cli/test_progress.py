"""Progress bars on ``gmem export``, ``import`` and ``replay --verify``: counts and rates
on a terminal, nothing at all when the command's output goes to a file or a pipe."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
from pathlib import Path

from governed_memory import open_service
from governed_memory.cli.progress import step_progress
from governed_memory.service.progress import Step, counted
from tests.support.fakes import body, principal
from tests.support.processes import GMEM

WRITER = principal()
BAR = "━+"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as a console's stderr does."""

    def isatty(self) -> bool:
        return True


def seeded(data_dir: Path, items: int = 3) -> None:
    service = open_service(data_dir=data_dir)
    try:
        for number in range(items):
            service.write(WRITER, body(id=f"m{number}", content=f"fact number {number}"))
    finally:
        service.close()


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    return env | {"TERM": "xterm", "COLUMNS": "160"}


def on_a_terminal(*args: str) -> tuple[int, str]:
    """Run ``gmem *args`` with stdout and stderr on a pseudo-terminal; its status and all
    it drew there."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [GMEM, *args], stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=environment()
    )
    os.close(follower)
    drawn = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    return process.wait(timeout=60), ANSI.sub("", drawn.decode("utf-8", "replace"))


def test_the_step_bar_draws_counts_and_rates_on_a_terminal_only() -> None:
    """On a terminal each stage has its bar with done of total and a rate; with stderr or
    stdout not a terminal nothing is drawn."""
    screen, pipe, piped_out = Terminal(), io.StringIO(), Terminal()
    for out, stream in ((Terminal(), screen), (Terminal(), pipe), (io.StringIO(), piped_out)):
        with step_progress(out, stream) as report:
            list(counted(range(2500), report, "check"))
            report(Step("load", 1200, 2500))
            report(Step("load", 2500, 2500))
    drawn = screen.getvalue()
    assert "check" in drawn
    assert "load" in drawn
    assert "2500/2500" in drawn
    assert "records/s" in drawn
    assert pipe.getvalue() == ""
    assert piped_out.getvalue() == ""


def test_export_import_and_verify_draw_nothing_when_not_on_a_terminal(tmp_path: Path) -> None:
    """Run by a script (stdout and stderr pipes), export, import and replay --verify print
    their result line and nothing on stderr."""
    source, target = tmp_path / "source", tmp_path / "target"
    seeded(source)
    dump = tmp_path / "log.jsonl"
    key = (source / "master.key").read_text("utf-8").strip()
    env = environment() | {"GMEM_MASTER_KEY": key}
    target.mkdir()
    for args in (
        ("export", "--output", str(dump), "--data-dir", str(source)),
        ("import", str(dump), "--data-dir", str(target)),
        ("replay", "--verify", "--data-dir", str(target)),
    ):
        done = subprocess.run(
            [GMEM, *args], capture_output=True, text=True, timeout=120, check=False, env=env
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        assert done.stdout.count("\n") == 1


def test_export_import_and_verify_draw_counts_and_rates_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal each of them draws its stages with records (events) done of total
    (the rate too, once there is one: see the test above), then its result line."""
    source, target = tmp_path / "source", tmp_path / "target"
    seeded(source)
    dump = tmp_path / "log.jsonl"
    status, drawn = on_a_terminal("export", "--output", str(dump), "--data-dir", str(source))
    assert status == 0, drawn
    records = len(dump.read_text("utf-8").splitlines())
    assert re.search(rf"export +{BAR} {records}/{records} records", drawn)
    (target / "master.key").parent.mkdir()
    (target / "master.key").write_bytes((source / "master.key").read_bytes())
    status, drawn = on_a_terminal("import", str(dump), "--data-dir", str(target))
    assert status == 0, drawn
    for stage in ("check", "load"):
        assert re.search(rf"{stage} +{BAR} {records}/{records} records", drawn)
    assert re.search(rf"rebuild +{BAR} 3/3 items", drawn) and "imported" in drawn
    status, drawn = on_a_terminal("replay", "--verify", "--data-dir", str(target))
    assert status == 0, drawn
    assert re.search(rf"verify +{BAR} (\d+)/\1 events", drawn) and "replay clean" in drawn
