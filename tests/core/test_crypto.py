"""Sealing, hashing and key wrapping (SPEC §7): tampering fails instead of decrypting."""

from __future__ import annotations

import base64
import dataclasses
import os
import secrets
import stat
from pathlib import Path

import pytest

from governed_memory.crypto import (
    SUBJECT_BLOB,
    Keyring,
    SealingKey,
    load_or_create_key_file,
    parse_master_key,
)
from governed_memory.errors import CryptoError


@pytest.fixture
def ring() -> Keyring:
    return Keyring(secrets.token_bytes(32))


def item_key(ring: Keyring, memory_id: str = "m1", subject: str = "customer-1") -> SealingKey:
    """A fresh item key of ``memory_id``, under a fresh key of ``subject``."""
    _, key = ring.new_item_key(ring.new_subject_key("acme", subject), memory_id)
    return key


def test_sealed_content_opens_only_for_its_item_and_version(ring: Keyring) -> None:
    """The associated data binds a blob to tenant, memory id and version (and purpose)."""
    key = item_key(ring)
    blob = ring.seal(key, 1, b"Prefers email.")
    assert ring.open(key, 1, blob) == b"Prefers email."
    for other in (dataclasses.replace(key, memory_id="m2"), key):
        version = 2 if other is key else 1
        with pytest.raises(CryptoError):
            ring.open(other, version, blob)
    with pytest.raises(CryptoError):
        ring.open(key, 1, blob, "reason")


def test_a_flipped_bit_fails_authentication(ring: Keyring) -> None:
    """Any change to the blob, header or ciphertext, is detected."""
    key = item_key(ring)
    blob = bytearray(ring.seal(key, 1, b"Prefers email."))
    for index in (len(blob) - 1, 40, 30, 5, 0):
        tampered = bytearray(blob)
        tampered[index] ^= 0x01
        with pytest.raises(CryptoError):
            ring.open(key, 1, bytes(tampered))


def test_blobs_moved_to_another_items_key_fail(ring: Keyring) -> None:
    """A blob sealed under one item's key does not open under another's, of the same
    subject or another tenant's."""
    subject = ring.new_subject_key("acme", "customer-1")
    _, mine = ring.new_item_key(subject, "m1")
    _, sibling = ring.new_item_key(subject, "m1")
    blob = ring.seal(mine, 1, b"Secret.")
    for other in (sibling, item_key(ring), dataclasses.replace(mine, tenant_id="globex")):
        with pytest.raises(CryptoError):
            ring.open(other, 1, blob)


def test_an_item_key_opens_only_under_its_subjects_key(ring: Keyring) -> None:
    """The wrapped item key is bound to its subject's key, tenant, subject and memory id."""
    subject = ring.new_subject_key("acme", "customer-1")
    stored, key = ring.new_item_key(subject, "m1")
    ring.forget_cached(stored.key_id)  # unwrapped again, not taken from the cache
    assert ring.item_sealing_key(subject, stored).secret == key.secret
    for wrong in (
        (ring.new_subject_key("acme", "customer-1"), stored),
        (subject, dataclasses.replace(stored, memory_id="m2")),
        (subject, dataclasses.replace(stored, subject_id="customer-2")),
        (subject, dataclasses.replace(stored, tenant_id="globex")),
    ):
        ring.forget_cached(stored.key_id)
        with pytest.raises(CryptoError):
            ring.item_sealing_key(*wrong)


def test_padding_hides_the_length_of_content_within_256_bytes(ring: Keyring) -> None:
    """Every content up to 255 UTF-8 bytes seals to one size; longer ones grow by whole
    256-byte blocks, so the blob's size no longer tells the content's length."""
    key = item_key(ring)
    sizes = {len(ring.seal(key, 1, b"x" * n)) for n in (0, 1, 16, 19, 200, 255)}
    assert len(sizes) == 1
    assert len(ring.seal(key, 1, b"x" * 256)) == sizes.pop() + 256
    for data in (b"", b"\x00\x80", b"\x80\x00\x00", "Zürich 🧠".encode()):
        assert ring.open(key, 1, ring.seal(key, 1, data)) == data


def test_content_sealed_under_a_subject_key_before_item_keys_still_opens(ring: Keyring) -> None:
    """Blobs of format 1 (the subject's key, unpadded) open as they always did."""
    subject = ring.new_subject_key("acme", "customer-1")
    key = ring.subject_sealing_key(subject, "m1")
    blob = ring.seal(key, 1, b"Written long ago.")
    assert blob[0] == SUBJECT_BLOB
    assert len(blob) == 1 + 16 + 12 + len(b"Written long ago.") + 16
    assert ring.open(key, 1, blob) == b"Written long ago."
    with pytest.raises(CryptoError):
        ring.open(item_key(ring), 1, blob)


def test_a_subject_key_cannot_be_unwrapped_under_another_master_key(ring: Keyring) -> None:
    """Wrapped keys are useless without the master key that wrapped them."""
    key = ring.new_subject_key("acme", "customer-1")
    with pytest.raises(CryptoError):
        Keyring(secrets.token_bytes(32)).unwrap(key)


def test_content_hashes_are_keyed_per_item(ring: Keyring) -> None:
    """The same content hashes differently under different items' keys."""
    a, b = item_key(ring, "m1"), item_key(ring, "m2")
    assert ring.content_hash(a, "same") == ring.content_hash(a, "same")
    assert ring.content_hash(a, "same") != ring.content_hash(b, "same")
    assert len(ring.content_hash(a, "same")) == 64


def test_a_sealing_key_keeps_its_secret_out_of_its_repr(ring: Keyring) -> None:
    """A sealing key in a log line or a traceback shows ids, never the key itself."""
    key = item_key(ring)
    assert key.secret.hex() not in repr(key)
    assert repr(key.secret) not in repr(key)


def test_term_ids_are_keyed_per_tenant(ring: Keyring) -> None:
    """The same word hashes to different ids in different tenants."""
    assert ring.term_ids("acme", ["email"]) == ring.term_ids("acme", ["email"])
    assert ring.term_ids("acme", ["email"]) != ring.term_ids("globex", ["email"])


def test_term_ids_stay_the_ids_every_stored_index_holds() -> None:
    """Term ids are HMAC-SHA-256 under the tenant's index key, as stores already hold them:
    the same master key, tenant and words give these ids, whatever makes them faster."""
    ring = Keyring(bytes(range(32)))
    assert ring.term_ids("acme", ["email", "café", "", "x" * 300]) == [
        -3255995569976579509,
        -5158444198708152228,
        5108609327463756512,
        -3650271661640218084,
    ]


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


def test_the_check_value_tells_master_keys_apart_and_reveals_neither() -> None:
    """One master key, one check value, whichever keyring computes it; another key gives
    another; the value holds neither the key nor its base64."""
    master = secrets.token_bytes(32)
    value = Keyring(master).check_value()
    assert value == Keyring(master).check_value()
    assert value != Keyring(secrets.token_bytes(32)).check_value()
    assert value.startswith("v1:")
    assert master.hex() not in value
    assert base64.b64encode(master).decode() not in value
