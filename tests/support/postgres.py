"""PostgreSQL for tests: a fresh schema reached through the URL, and deployments on it.

Every test that runs ``gmem serve`` on PostgreSQL gets a schema of its own, named in the
connection URL's ``search_path`` exactly as an operator would point instances at one, and
dropped afterwards.
"""

from __future__ import annotations

import base64
import os
import secrets
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import quote

import httpx
import psycopg
from psycopg import sql

from tests.support.processes import create_key, gmem, serving


@contextmanager
def fresh_schema(dsn: str) -> Iterator[str]:
    """A new, empty schema on ``dsn``'s server; the URL that reaches it; dropped after."""
    schema = "gmem_test_" + uuid.uuid4().hex[:12]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    separator = "&" if "?" in dsn else "?"
    try:
        yield f"{dsn}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


class Deployment:
    """Everything instances on one database share: its URL, the master key, a data dir."""

    def __init__(self, tmp_path: Path, database_url: str) -> None:
        self.tmp_path = tmp_path
        self.env = os.environ | {
            "GMEM_DATABASE_URL": database_url,
            "GMEM_MASTER_KEY": base64.b64encode(secrets.token_bytes(32)).decode("ascii"),
            "GMEM_EXPIRY_INTERVAL_SECONDS": "0.5",
        }

    def gmem(self, *args: str) -> str:
        """Run a ``gmem`` command against the shared database; its stdout."""
        return gmem(self.tmp_path / "cli", *args, env=self.env, timeout=60)

    def key(self, scopes: str = "memory:write,memory:read,audit:read") -> dict[str, str]:
        """Authorization headers of a new trusted key of tenant acme for every agent."""
        token = create_key(self.tmp_path / "cli", scopes, "trusted", env=self.env)
        return {"Authorization": f"Bearer {token}"}

    @contextmanager
    def instance(self, name: str) -> Iterator[httpx.Client]:
        """One ``gmem serve`` on a free port; SIGTERM and wait on exit; no traceback logged."""
        log = self.tmp_path / f"{name}.log"
        with serving(self.tmp_path / name, log, env=self.env) as client:
            yield client
        assert "Traceback" not in log.read_text()

    def pair(self, stack: ExitStack) -> list[httpx.Client]:
        """Two instances started at the same time (they race to migrate the empty schema),
        stopped when ``stack`` closes."""
        started: list[httpx.Client] = []
        threads = [
            threading.Thread(
                target=lambda n=name: started.append(stack.enter_context(self.instance(n)))
            )
            for name in ("a", "b")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(started) == 2
        return started


__all__ = ["Deployment", "fresh_schema"]
