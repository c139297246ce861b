"""Fixtures for the CLI tests: a clean GMEM_* environment and a way to run ``gmem``."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from governed_memory.cli import main


@dataclass
class Run:
    """What one ``gmem`` run printed and returned."""

    status: int
    out: str
    err: str


Gmem = Callable[..., Run]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GMEM_* setting of the machine leaks into a test.

    ``GMEM_TEST_POSTGRES_DSN`` stays: it names the test server, it is not a setting, and CI
    fails the PostgreSQL tests without it.
    """
    for name in list(os.environ):
        if name.startswith("GMEM_") and not name.startswith("GMEM_TEST_"):
            monkeypatch.delenv(name)


@pytest.fixture
def gmem(capsys: pytest.CaptureFixture[str]) -> Gmem:
    """Run ``gmem`` in process with these arguments; usage errors are runs with status 2."""

    def run(*args: str) -> Run:
        out = io.StringIO()
        try:
            status = main(list(args), out=out)
        except SystemExit as exit_:
            status = int(exit_.code or 0)
        captured = capsys.readouterr()
        return Run(status, out.getvalue() + captured.out, captured.err)

    return run
