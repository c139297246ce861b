"""PostgreSQL configuration: a shared master key is required, the pool size is settable."""

from __future__ import annotations

import pytest

from governed_memory import open_service
from governed_memory.config import load_settings
from governed_memory.errors import ValidationError


def test_a_postgres_service_refuses_to_start_without_a_master_key() -> None:
    """Instances sharing a database must share the master key, so it cannot be defaulted."""
    with pytest.raises(ValidationError, match="GMEM_MASTER_KEY is required"):
        open_service(database_url="postgresql://nobody@127.0.0.1:1/none")


def test_the_pool_size_reaches_the_postgres_store_only() -> None:
    """GMEM_DATABASE_POOL_MAX becomes the PostgreSQL pool's max_size, and nothing else."""
    pg = load_settings(database_url="postgresql://x@127.0.0.1/db", database_pool_max=25)
    assert pg.store_options() == {"max_size": 25}
    assert load_settings(database_pool_max=25).store_options() == {}
