"""Fixtures shared by the store tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from tests.conftest import postgres_dsn


@pytest.fixture
def postgres_schema() -> Iterator[tuple[str, str]]:
    """A DSN and a fresh schema name, dropped afterwards."""
    dsn = postgres_dsn()
    assert dsn is not None
    name = "gmem_test_" + uuid.uuid4().hex[:12]
    yield dsn, name
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
