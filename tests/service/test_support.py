"""What the use cases share (``service/_support.py``): fresh ids."""

from __future__ import annotations

import time
import uuid

from governed_memory.service._support import new_id


def test_a_new_id_is_a_canonical_uuid7_of_the_current_millisecond() -> None:
    """A fresh id reads back as itself through ``uuid.UUID``: version 7, the RFC 4122
    variant, lowercase with hyphens, its first 48 bits the time in milliseconds."""
    before = time.time_ns() // 1_000_000
    ids = [new_id() for _ in range(200)]
    after = time.time_ns() // 1_000_000
    for value in ids:
        parsed = uuid.UUID(value)
        assert str(parsed) == value
        assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
        assert before <= parsed.int >> 80 <= after
    assert len(set(ids)) == len(ids)
