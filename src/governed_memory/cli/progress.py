"""A progress bar for long commands (``gmem reindex``), drawn with rich on stderr.

The service reports progress through a callback (:data:`governed_memory.service.reindex.
OnProgress`); this module is the only place that draws it. The bar is shown only when
both stdout and stderr are terminals: a command piped into a file or run by a script
prints its result line and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from governed_memory.service.reindex import OnProgress
from governed_memory.service.reindex import Progress as Reported


class _Rate(ProgressColumn):
    """Items per second, once there is a rate to show."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:,.0f} items/s", style="progress.data.speed")


@contextmanager
def rebuild_progress(out: TextIO, stream: TextIO | None = None) -> Iterator[OnProgress]:
    """A callback that draws a rebuild's progress (tenants, items of total, rate, time) on
    ``stream`` (stderr) while the block runs; it draws nothing unless both ``stream`` and
    ``out`` (where the command prints its result) are terminals."""
    console = Console(file=stream, stderr=stream is None)
    bar = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("items"),
        _Rate(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not (console.is_terminal and out.isatty()),
        transient=False,
    )
    task = bar.add_task("reindex", total=None)

    def report(progress: Reported) -> None:
        bar.update(
            task,
            description=f"tenant {min(progress.tenants_done + 1, progress.tenants)}"
            f"/{progress.tenants}",
            completed=progress.indexed,
            total=progress.items or None,
        )

    with bar:
        yield report


__all__ = ["rebuild_progress"]
