"""The package's public API is explicit: a sorted ``__all__`` whose names all exist."""

from __future__ import annotations

import governed_memory


def test_all_is_sorted_and_complete() -> None:
    """``__all__`` is sorted, unique, and every name in it is importable."""
    names = governed_memory.__all__
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(governed_memory, name), name


def test_the_package_is_typed() -> None:
    """A py.typed marker ships with the package."""
    from importlib import resources

    assert resources.files("governed_memory").joinpath("py.typed").is_file()
