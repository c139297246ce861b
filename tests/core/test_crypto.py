"""Sealing, hashing and key wrapping (SPEC §7): tampering fails instead of decrypting."""

from __future__ import annotations

import base64
import os
import secrets
import stat
from pathlib import Path

import pytest

from governed_memory.crypto import (
    Keyring,
    load_or_create_key_file,
    parse_master_key,
)
from governed_memory.errors import CryptoError


@pytest.fixture
def ring() -> Keyring:
    return Keyring(secrets.token_bytes(32))


def test_sealed_content_opens_only_for_its_item_and_version(ring: Keyring) -> None:
    """The associated data binds a blob to tenant, memory id and version."""
    key = ring.new_subject_key("acme", "customer-1")
    blob = ring.seal(key, "m1", 1, "Prefers email.")
    assert ring.open(key, "m1", 1, blob) == "Prefers email."
    with pytest.raises(CryptoError):
        ring.open(key, "m2", 1, blob)
    with pytest.raises(CryptoError):
        ring.open(key, "m1", 2, blob)


def test_a_flipped_bit_fails_authentication(ring: Keyring) -> None:
    """Any change to the ciphertext is detected."""
    key = ring.new_subject_key("acme", "customer-1")
    blob = bytearray(ring.seal(key, "m1", 1, "Prefers email."))
    for index in (len(blob) - 1, 40, 30):
        tampered = bytearray(blob)
        tampered[index] ^= 0x01
        with pytest.raises(CryptoError):
            ring.open(key, "m1", 1, bytes(tampered))


def test_blobs_swapped_between_tenants_or_subjects_fail(ring: Keyring) -> None:
    """A blob sealed for one subject does not open under another subject's key."""
    mine = ring.new_subject_key("acme", "customer-1")
    theirs = ring.new_subject_key("globex", "customer-1")
    blob = ring.seal(mine, "m1", 1, "Secret.")
    with pytest.raises(CryptoError):
        ring.open(theirs, "m1", 1, blob)


def test_a_subject_key_cannot_be_unwrapped_under_another_master_key(ring: Keyring) -> None:
    """Wrapped keys are useless without the master key that wrapped them."""
    key = ring.new_subject_key("acme", "customer-1")
    with pytest.raises(CryptoError):
        Keyring(secrets.token_bytes(32)).unwrap(key)


def test_content_hashes_are_keyed_per_subject(ring: Keyring) -> None:
    """The same content hashes differently under different subject keys."""
    a = ring.new_subject_key("acme", "customer-1")
    b = ring.new_subject_key("acme", "customer-2")
    assert ring.content_hash(a, "same") == ring.content_hash(a, "same")
    assert ring.content_hash(a, "same") != ring.content_hash(b, "same")
    assert len(ring.content_hash(a, "same")) == 64


def test_term_ids_are_keyed_per_tenant(ring: Keyring) -> None:
    """The same word hashes to different ids in different tenants."""
    assert ring.term_ids("acme", ["email"]) == ring.term_ids("acme", ["email"])
    assert ring.term_ids("acme", ["email"]) != ring.term_ids("globex", ["email"])


def test_the_master_key_must_be_32_bytes_of_base64() -> None:
    """GMEM_MASTER_KEY is validated with a message naming it."""
    good = base64.b64encode(secrets.token_bytes(32)).decode()
    assert len(parse_master_key(good)) == 32
    for bad in ["not base64!", base64.b64encode(b"short").decode()]:
        with pytest.raises(CryptoError, match="GMEM_MASTER_KEY"):
            parse_master_key(bad)


def test_the_key_file_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    """The embedded default keeps its master key in a private file, stable across opens."""
    first = load_or_create_key_file(tmp_path)
    assert load_or_create_key_file(tmp_path) == first
    assert stat.S_IMODE(os.stat(tmp_path / "master.key").st_mode) == 0o600


def test_no_plaintext_word_is_kept_in_the_keyring(ring: Keyring) -> None:
    """Search terms are hashed on the fly: no cache holds content words after the call."""
    ring.term_ids("acme", ["zqxsecretword"])
    assert "zqxsecretword" not in repr(vars(ring))


def test_cached_data_keys_expire(ring: Keyring, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unwrapped key lingers in memory for a bounded time only."""
    import governed_memory.crypto as crypto

    key = ring.new_subject_key("acme", "customer-1")
    ring.unwrap(key)
    assert crypto._fresh(ring._unwrapped, key.key_id) is not None
    monkeypatch.setattr(crypto, "KEY_CACHE_SECONDS", -1.0)
    ring.forget_cached(key.key_id)
    ring.unwrap(key)
    assert crypto._fresh(ring._unwrapped, key.key_id) is None
