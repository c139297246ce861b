"""Progress bars for long commands (``gmem reindex``, ``replay``, ``export``, ``import``),
drawn with rich on stderr.

The service reports progress through a callback (:data:`governed_memory.service.reindex.
OnProgress` for a rebuild, :data:`governed_memory.service.progress.OnStep` for the stages
of an export, an import or a replay verification); this module is the only place that
draws it. A bar is shown only when both stdout and stderr are terminals: a command piped
into a file or run by a script prints its result line and nothing else.
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
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from governed_memory.service.progress import OnStep, Step
from governed_memory.service.reindex import OnProgress
from governed_memory.service.reindex import Progress as Reported


class _Rate(ProgressColumn):
    """Units (the task's field ``unit``) per second, once there is a rate to show."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        text = "" if speed is None else f"{speed:,.0f} {task.fields['unit']}/s"
        return Text(text, style="progress.data.speed")


def _bar(out: TextIO, stream: TextIO | None) -> Progress:
    """A bar on ``stream`` (stderr when None): description, bar, done/total, unit, rate,
    time; disabled unless both ``stream`` and ``out`` are terminals. Every task of it has
    the field ``unit``."""
    console = Console(file=stream, stderr=stream is None)
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        _Rate(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not (console.is_terminal and out.isatty()),
        transient=False,
    )


@contextmanager
def rebuild_progress(out: TextIO, stream: TextIO | None = None) -> Iterator[OnProgress]:
    """A callback that draws a rebuild's progress (tenants, items of total, rate, time) on
    ``stream`` (stderr) while the block runs; it draws nothing unless both ``stream`` and
    ``out`` (where the command prints its result) are terminals."""
    bar = _bar(out, stream)
    task = bar.add_task("reindex", total=None, unit="items")

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


@contextmanager
def step_progress(out: TextIO, stream: TextIO | None = None) -> Iterator[OnStep]:
    """A callback that draws one bar per stage of a long operation (records done of
    total, rate, time) on ``stream`` (stderr) while the block runs; the same rule as
    :func:`rebuild_progress` for when it draws nothing."""
    bar = _bar(out, stream)
    tasks: dict[str, TaskID] = {}

    def report(step: Step) -> None:
        if step.stage not in tasks:
            tasks[step.stage] = bar.add_task(step.stage, total=step.total, unit=step.unit)
        bar.update(tasks[step.stage], completed=step.done, total=step.total)

    with bar:
        yield report


__all__ = ["rebuild_progress", "step_progress"]
