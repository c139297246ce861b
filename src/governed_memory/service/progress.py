"""How a long whole-store operation (export, import, replay verification) reports its
progress: a :class:`Step` per stage, told to a callback from the thread doing the work.

The service never draws anything; ``gmem`` turns the steps into bars
(:mod:`governed_memory.cli.progress`). A stage's ``total`` is ``None`` when it is not
known in advance (the records of an export being read, say).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from governed_memory.service.reindex import OnProgress, Progress

T = TypeVar("T")

#: Records between two reports of a counted stage.
STEP_EVERY = 1_000


@dataclass(frozen=True, slots=True)
class Step:
    """``done`` of ``total`` ``unit`` of the stage ``stage`` (``total`` None: not known)."""

    stage: str
    done: int
    total: int | None = None
    unit: str = "records"


#: Told of a long operation's progress.
OnStep = Callable[[Step], None]


def silent(step: Step) -> None:
    """The callback of a caller that wants no progress."""


def counted(
    items: Iterable[T], on_step: OnStep, stage: str, total: int | None = None
) -> Iterator[T]:
    """``items`` unchanged, telling ``on_step`` how many have passed every
    :data:`STEP_EVERY` and once at the end."""
    done = 0
    on_step(Step(stage, 0, total))
    for item in items:
        yield item
        done += 1
        if done % STEP_EVERY == 0:
            on_step(Step(stage, done, total))
    on_step(Step(stage, done, total if total is not None else done))


class Tally(Generic[T]):
    """``items`` as they are iterated (once), counted on from ``start.done``: ``on_step``
    is told the count every :data:`STEP_EVERY`; ``done`` is the count so far."""

    def __init__(self, items: Iterable[T], on_step: OnStep, start: Step) -> None:
        self._items = iter(items)
        self._on_step = on_step
        self._start = start
        self.done = start.done

    def __iter__(self) -> Iterator[T]:
        for item in self._items:
            self.done += 1
            if self.done % STEP_EVERY == 0:
                self._on_step(dataclasses.replace(self._start, done=self.done))
            yield item


def rebuild_steps(on_step: OnStep, stage: str = "rebuild") -> OnProgress:
    """A rebuild's progress as steps of ``stage``: index entries made of those to make."""

    def report(progress: Progress) -> None:
        on_step(Step(stage, progress.indexed, progress.items or None, "items"))

    return report


__all__ = ["STEP_EVERY", "OnStep", "Step", "Tally", "counted", "rebuild_steps", "silent"]
