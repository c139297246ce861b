"""The PostgreSQL store's statements stay within what psycopg caches: a statement above
psycopg's limits is parsed again on every call, which costs more than the round trip the
merged write statement saves (docs/benchmarks.md item 6)."""

from __future__ import annotations

import itertools

from psycopg import _queries

from governed_memory.store.postgres import sql


def test_the_parameter_limit_the_write_path_keeps_under_is_psycopgs_own() -> None:
    assert sql.CACHED_PARAMS == _queries.MAX_CACHED_STATEMENT_PARAMS


def test_every_merged_item_and_event_statement_is_short_enough_to_be_cached() -> None:
    for new, indexed, index, idempotency, key, item_key in itertools.product(
        (False, True), repeat=6
    ):
        statement = sql.item_and_event(
            new=new,
            indexed=indexed,
            index=index,
            idempotency=idempotency,
            key=key,
            item_key=item_key,
        )
        assert len(statement.encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH
