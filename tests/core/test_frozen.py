"""``quick_init``: the same frozen instances as a dataclass's own ``__init__``, faster.

The core's items, events and keys are frozen, slotted dataclasses made by the thousand in a
rebuild or a search; ``quick_init`` gives them an ``__init__`` that sets their slots
directly. It must build exactly what the generated one builds, keep them frozen, and refuse
any class whose generated ``__init__`` does more than set its fields.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import typing
from dataclasses import InitVar, dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from governed_memory.core.events import MemoryPromoted, MemoryWritten
from governed_memory.core.frozen import quick_init
from governed_memory.core.model import ItemState
from governed_memory.core.values import Kind, Provenance, Status, Trust


@dataclass(frozen=True, slots=True)
class Base:
    name: str
    count: int


@dataclass(frozen=True, slots=True)
class Plain(Base):
    note: str | None = None
    size: int = 7


@quick_init
@dataclass(frozen=True, slots=True)
class Quick(Base):
    note: str | None = None
    size: int = 7


def test_it_builds_what_the_generated_init_builds_positionally_and_by_keyword() -> None:
    cases: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        (("a", 1), {}),
        (("a", 1, "n"), {}),
        (("a",), {"count": 2, "size": 9}),
        ((), {"name": "b", "count": 3, "note": "x", "size": 0}),
    ]
    for args, kwargs in cases:
        quick, plain = Quick(*args, **kwargs), Plain(*args, **kwargs)
        assert dataclasses.astuple(quick) == dataclasses.astuple(plain)
        assert repr(quick).removeprefix("Quick") == repr(plain).removeprefix("Plain")


def test_its_signature_and_type_hints_are_the_generated_ones() -> None:
    assert inspect.signature(Quick) == inspect.signature(Plain)
    assert typing.get_type_hints(Quick.__init__) == typing.get_type_hints(Plain.__init__)
    hints = typing.get_type_hints(ItemState.__init__)
    assert hints["created_at"] is datetime and hints["provenance"] is Provenance


def test_its_arguments_are_checked_as_the_generated_init_checks_them() -> None:
    wrong: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((), {}),
        (("a",), {}),
        (("a", 1), {"colour": "red"}),
        (("a", 1, None, 2, 3), {}),
    ]
    for args, kwargs in wrong:
        with pytest.raises(TypeError):
            Plain(*args, **kwargs)
        with pytest.raises(TypeError):
            Quick(*args, **kwargs)


def test_instances_stay_frozen_hashable_and_picklable() -> None:
    item = Quick("a", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.count = 2  # type: ignore[misc]
    assert item == Quick("a", 1) and hash(item) == hash(Quick("a", 1))
    assert pickle.loads(pickle.dumps(item)) == item  # noqa: S301 - our own bytes
    assert copy.copy(item) == item
    assert dataclasses.replace(item, size=1) == Quick("a", 1, None, 1)
    assert not hasattr(item, "__dict__")


def test_the_core_classes_use_it() -> None:
    """An item, an event of a subclass with inherited fields, a provenance: each field
    lands where it was given."""
    at = datetime(2026, 1, 2, tzinfo=UTC)
    provenance = Provenance(source="test", ref="1")
    values: dict[str, Any] = {
        "tenant_id": "acme",
        "id": "m1",
        "agent_id": "bot",
        "subject_id": "s",
        "purpose": "support",
        "kind": Kind.FACT,
        "content": b"sealed",
        "content_version": 1,
        "content_hash": "h",
        "provenance": provenance,
        "trust": Trust.VERIFIED,
        "confidence": 0.5,
        "created_at": at,
        "updated_at": at,
        "expires_at": at,
        "version": 2,
        "status": Status.ACTIVE,
        "supersedes_id": None,
        "superseded_by": "m2",
        "written_by": "w",
        "tokens": 3,
    }
    item = ItemState(**values)
    assert dataclasses.asdict(item) == dataclasses.asdict(ItemState(*values.values()))
    assert {name: getattr(item, name) for name in values} == values
    promoted = MemoryPromoted("e", "acme", "m1", 2, at, "r", None)
    assert (promoted.event_id, promoted.version, promoted.idempotency_key) == ("e", 2, None)
    assert provenance.version is None
    for cls in (ItemState, MemoryWritten, MemoryPromoted, Provenance):
        assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
        assert "__quick_set0" in cls.__init__.__code__.co_freevars  # the quick one


def _refused(cls: type) -> str:
    with pytest.raises(TypeError) as refused:
        quick_init(cls)
    return str(refused.value)


def test_it_refuses_a_class_whose_init_does_more_than_set_its_fields() -> None:
    @dataclass(slots=True)
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True, slots=True)
    class Own:
        a: int

        def __init__(self, a: int) -> None:
            object.__setattr__(self, "a", abs(a))

    @dataclass(frozen=True, slots=True, init=False)
    class NoInit:
        a: int

    @dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = field(default_factory=list)

    @dataclass(frozen=True, slots=True)
    class Derived:
        a: int
        b: int = field(init=False, default=0)

    @dataclass(frozen=True, slots=True)
    class Keyword:
        a: int = field(kw_only=True)

    @dataclass(frozen=True, slots=True)
    class Initvar:
        a: int
        b: InitVar[int]

    assert "not a frozen dataclass with slots" in _refused(Mutable)
    assert "not a frozen dataclass with slots" in _refused(NoSlots)
    assert "__init__ of its own" in _refused(Own)
    assert "__init__ of its own" in _refused(NoInit)
    assert "__post_init__" in _refused(Checked)
    assert "default_factory" in _refused(Factory)
    assert "plain __init__ argument" in _refused(Derived)
    assert "plain __init__ argument" in _refused(Keyword)
    assert "more than its fields" in _refused(Initvar)
