"""The hash chain's encoding (``governed_memory.chain``): every stored log verifies by it."""

from __future__ import annotations

from governed_memory.chain import GENESIS, chain_hash, event_digest, next_hash


def test_an_events_digest_stays_the_one_its_stored_hash_was_made_with() -> None:
    """The canonical encoding of the stored columns gives these digests (text with
    non-ASCII and an unpaired surrogate, integers, ``None``): a log written before
    verifies with the code of today."""
    written = (
        "e1",
        "memory.written",
        "acme",
        "m1",
        "s1",
        1,
        1700000000000000,
        "bob",
        None,
        1,
        '{"a":"é"}',
    )
    assert event_digest(written).hex() == (
        "5d8ecaadc60966e51983782cd9f23917669dbcd55c4e7e7b060d9db32a147b10"
    )
    assert event_digest((None, 0, -5, "", "\ud800")).hex() == (
        "bff72487d21041e806c726cad928c1a3607cce1c00ea0b612d9ef769e347e01d"
    )


def test_an_events_hash_follows_its_tenants_previous_hash() -> None:
    """``next_hash`` is SHA-256 of the previous hash and the digest, from GENESIS on."""
    columns = ("e1", "memory.written", "acme", None, None, None, 1, "bob", None, 1, "{}")
    assert next_hash(GENESIS, columns) == chain_hash(GENESIS, event_digest(columns))
    assert next_hash(GENESIS, columns) != next_hash(bytes([1]) * 32, columns)
