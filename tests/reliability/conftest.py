"""Fixtures: the in-process HTTP app (:mod:`tests.support.api`), and two ``gmem serve`` on
one PostgreSQL schema (:mod:`tests.support.postgres`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.conftest import postgres_dsn
from tests.support.api import admin, api, make_api
from tests.support.postgres import Deployment, fresh_schema

__all__ = ["admin", "api", "make_api", "pg_pair"]


@pytest.fixture
def pg_pair(tmp_path: Path) -> Iterator[tuple[Deployment, list[httpx.Client]]]:
    """Two instances on a fresh schema, rate limits out of the way of load tests."""
    dsn = postgres_dsn()
    assert dsn is not None
    with fresh_schema(dsn) as url, ExitStack() as stack:
        deployment = Deployment(tmp_path, url)
        deployment.env["GMEM_RATE_LIMIT_REQUESTS"] = str(10**9)
        yield deployment, deployment.pair(stack)
