"""The per-tenant hash chain of the event log: how one stored event is hashed.

Every event carries the hash of its tenant's previous event, so that an event edited,
deleted, inserted or moved in the store shows as a break of the chain (``gmem audit
verify``). Two SHA-256 steps:

- the event's *digest* is SHA-256 over a canonical encoding of its stored columns (tenant,
  event id, type, item id, version, time, actor, the stored payload text with its sealed
  content as written — ciphertext, never plaintext). No position is in it: positions are
  assigned by the store as it commits, and an export keeps them anyway;
- the event's *hash* is ``SHA-256(previous hash ‖ digest)``; the first event of a tenant
  follows :data:`GENESIS` (32 zero bytes).

The second step is two byte strings concatenated, so PostgreSQL computes it in SQL inside
the transaction that assigns the position (``sha256(prev || digest)``), after reading the
tenant's head under the write lock; Python computes the same everywhere else.

The encoding is unambiguous: each column is a type tag, then for text and integers the
length of their UTF-8 bytes and the bytes. This module imports nothing of the package.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

#: What the first event of every tenant follows.
GENESIS = bytes(32)
#: Names this encoding; a future one would change it, and every digest with it.
_DOMAIN = b"governed-memory event chain v1\x00"


def _column(value: object) -> bytes:
    if isinstance(value, str):  # most columns: one test, then the bytes
        data = value.encode("utf-8", "surrogatepass")
        return b"s" + len(data).to_bytes(8, "big") + data
    if value is None:
        return b"n"
    if isinstance(value, int) and not isinstance(value, bool):
        data = str(value).encode("ascii")
        return b"i" + len(data).to_bytes(8, "big") + data
    raise TypeError(f"an event column of type {type(value).__name__} cannot be hashed")


def event_digest(columns: Sequence[object]) -> bytes:
    """SHA-256 of an event's stored columns (``codec.EVENT_COLUMNS`` order), canonically."""
    digest = hashlib.sha256(_DOMAIN + len(columns).to_bytes(2, "big"))
    for value in columns:  # fed to the hash as each is encoded (every write makes one)
        digest.update(_column(value))
    return digest.digest()


def chain_hash(previous: bytes, digest: bytes) -> bytes:
    """The hash of an event whose tenant's previous event hashed to ``previous``."""
    return hashlib.sha256(previous + digest).digest()


def next_hash(previous: bytes, columns: Sequence[object]) -> bytes:
    """The hash of the event with these stored columns after ``previous``."""
    return chain_hash(previous, event_digest(columns))


__all__ = ["GENESIS", "chain_hash", "event_digest", "next_hash"]
