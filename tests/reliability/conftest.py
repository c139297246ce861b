"""Fixtures: the HTTP app of tests/http, and two ``gmem serve`` on one PostgreSQL schema."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import quote

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.conftest import postgres_dsn
from tests.http.conftest import admin, api, make_api
from tests.store.test_postgres_instances import Deployment

__all__ = ["admin", "api", "make_api", "pg_pair"]


@pytest.fixture
def pg_pair(tmp_path: Path) -> Iterator[tuple[Deployment, list[httpx.Client]]]:
    """Two instances on a fresh schema, rate limits out of the way of load tests."""
    dsn = postgres_dsn()
    assert dsn is not None
    schema = "gmem_test_" + uuid.uuid4().hex[:12]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    separator = "&" if "?" in dsn else "?"
    url = f"{dsn}{separator}options={quote(f'-csearch_path={schema}')}"
    deployment = Deployment(tmp_path, url)
    deployment.env["GMEM_RATE_LIMIT_REQUESTS"] = str(10**9)
    try:
        with ExitStack() as stack:
            started: list[httpx.Client] = []
            threads = [
                threading.Thread(
                    target=lambda n=name: started.append(
                        stack.enter_context(deployment.instance(n))
                    )
                )
                for name in ("a", "b")
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            assert len(started) == 2
            yield deployment, started
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
