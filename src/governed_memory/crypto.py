"""Subject keys, item keys, sealed content and keyed hashes: crypto-shredding (SPEC §7).

- Each (tenant, subject) has a random 256-bit data key, stored only wrapped (AES-256-GCM)
  under the master key, with tenant, subject and key id as associated data.
- Each item has a random 256-bit key of its own, made at its first write and used by every
  later version, stored only wrapped under its subject's key (associated data: tenant,
  subject, memory id, key id). Destroying that one row destroys the item's content alone
  (erase, retention); forgetting the subject destroys every item key with the subject key.
- Content is sealed with AES-256-GCM under the item's key; the associated data binds the
  ciphertext to its tenant, memory id and the version that wrote it, so a blob moved to
  another item or version fails authentication instead of decrypting. Before sealing, the
  plaintext is padded to a multiple of :data:`PAD_BLOCK` bytes, so the size of a blob does
  not tell the length of its content (only which 256-byte bucket it falls in).
- ``content_hash`` is HMAC-SHA-256 under a key derived from the key that sealed the
  content: once that key is destroyed, the hash can no longer be linked to any guess.
- Search terms are stored as 64-bit keyed hashes under a per-tenant index key derived from
  the master key, so no plaintext word reaches the database files.

Blob layouts: ``0x02 | item key id (16 bytes) | nonce (12 bytes) | ciphertext and tag`` of
the padded plaintext; and, for items written before items had keys of their own, ``0x01 |
subject key id | nonce | ciphertext and tag`` of the plaintext itself (still opened, never
written for a new item).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import os
import secrets
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from governed_memory.errors import CryptoError
from governed_memory.records import ItemKey, SubjectKey

#: Content sealed directly under the subject key, unpadded (written before item keys).
SUBJECT_BLOB = 1
#: Content sealed under the item's own key, padded.
ITEM_BLOB = 2
#: Plaintext is padded to a multiple of this many bytes: every memory of up to 255 UTF-8
#: bytes (a sentence or three, a card or phone number written by mistake) seals to the
#: same size, and a longer one tells its length only to within 256 bytes, at a cost of
#: 128 bytes a blob on average.
PAD_BLOCK = 256
KEY_ID_BYTES = 16
NONCE_BYTES = 12
_SHA256_BLOCK = 64
MASTER_KEY_FILE = "master.key"
#: A term id: the first 8 bytes of its HMAC as a signed big-endian integer.
_SIGNED_64 = struct.Struct(">q")


def _hkdf(secret: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(secret)


def _aad(*parts: str) -> bytes:
    return "\x00".join(parts).encode("utf-8")


def pad(data: bytes) -> bytes:
    """``data``, a 0x80 byte and zeros up to the next multiple of :data:`PAD_BLOCK`
    (ISO/IEC 7816-4 padding: removable whatever bytes ``data`` holds)."""
    padded = data + b"\x80"
    return padded + b"\x00" * (-len(padded) % PAD_BLOCK)


def unpad(padded: bytes) -> bytes:
    """The inverse of :func:`pad`; :class:`CryptoError` if the padding is not there."""
    body = padded.rstrip(b"\x00")
    if not body or body[-1] != 0x80 or len(padded) % PAD_BLOCK:
        raise CryptoError("sealed content is not padded")
    return body[:-1]


@dataclass(frozen=True, slots=True)
class SealingKey:
    """The unwrapped key that seals one item's content, and how it seals it: the item's own
    key (:data:`ITEM_BLOB`) or, for an item written before items had keys, its subject's
    key (:data:`SUBJECT_BLOB`). The secret is kept out of ``repr``."""

    tenant_id: str
    memory_id: str
    key_id: bytes
    secret: bytes = field(repr=False)
    blob_format: int


def parse_master_key(encoded: str) -> bytes:
    """A master key from its base64 form; it must decode to exactly 32 bytes."""
    try:
        raw = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise CryptoError("GMEM_MASTER_KEY is not valid base64") from None
    if len(raw) != 32:
        raise CryptoError("GMEM_MASTER_KEY must decode to 32 bytes")
    return raw


def load_or_create_key_file(directory: Path) -> bytes:
    """The master key kept in ``directory/master.key``, created with mode 0600 if absent."""
    path = directory / MASTER_KEY_FILE
    directory.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        _create_key_file(directory, path)
    try:
        return parse_master_key(path.read_bytes().decode("ascii"))
    except (CryptoError, UnicodeDecodeError):
        # The key file, not GMEM_MASTER_KEY, is what is wrong: name it (never its bytes).
        raise CryptoError(
            f"the key file {path.resolve()} is malformed: it must hold one line, the base64 "
            "of 32 bytes; put the store's own master.key back, or set GMEM_MASTER_KEY"
        ) from None


def _create_key_file(directory: Path, path: Path) -> None:
    """Write a new key to a private temporary file, fsync it, then link it into place.

    The key file appears complete or not at all: a crash (or a second process reading it)
    never meets an empty or half-written ``master.key``, which would keep the store from
    ever opening again. ``os.link`` refuses to replace a key another process linked first;
    both then use that one.
    """
    temporary = directory / f".{MASTER_KEY_FILE}.{secrets.token_hex(8)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(base64.b64encode(secrets.token_bytes(32)).decode("ascii") + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another process won: its key is the key
            os.link(temporary, path)
        directory_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(directory_fd)  # make the new name durable, not only the data
        finally:
            os.close(directory_fd)
    finally:
        temporary.unlink(missing_ok=True)


#: The store-meta name under which a store records the check value of its master key at
#: its first start (:meth:`Keyring.check_value`): a keyed hash, never the key itself.
MASTER_KEY_CHECK = "master_key_check"
#: What the check value of a master key is the keyed hash of (a fixed label).
CHECK_LABEL = b"gmem master key check value"
#: The form of the check value, before its hex digits.
CHECK_FORMAT = "v1:"

KEY_CACHE_SECONDS = 60.0
KEY_CACHE_SIZE = 4096


def _fresh(cache: dict[bytes, tuple[float, bytes]], key_id: bytes) -> bytes | None:
    entry = cache.get(key_id)
    if entry is None:
        return None
    if entry[0] < time.monotonic():
        cache.pop(key_id, None)
        return None
    return entry[1]


def _remember(cache: dict[bytes, tuple[float, bytes]], key_id: bytes, value: bytes) -> None:
    if len(cache) >= KEY_CACHE_SIZE:
        cache.clear()
    cache[key_id] = (time.monotonic() + KEY_CACHE_SECONDS, value)


class _TermHasher:
    """HMAC-SHA-256 under one tenant's index key, its key schedule done once.

    ``hmac.digest`` sets the key up on every call (two of its four SHA-256 blocks, and
    OpenSSL's per-call setup); a write hashes each distinct term of its content, so the
    padded key's inner and outer states are hashed once here and copied for every term.
    The digests are exactly HMAC-SHA-256's (RFC 2104: the key is shorter than a block).
    """

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        assert len(key) <= _SHA256_BLOCK, "a longer key would be hashed first"
        padded = key.ljust(_SHA256_BLOCK, b"\x00")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in padded))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in padded))

    def ids(self, words: list[str]) -> list[int]:
        """Each word's signed 64-bit id: the first 8 bytes of its HMAC, big-endian."""
        ids: list[int] = []
        add, first_bytes = ids.append, _SIGNED_64.unpack_from
        inner_state, outer_state = self._inner, self._outer
        for word in words:
            inner = inner_state.copy()
            inner.update(word.encode("utf-8"))
            outer = outer_state.copy()
            outer.update(inner.digest())
            add(first_bytes(outer.digest())[0])
        return ids


class Keyring:
    """Everything that needs the master key: wrapping, sealing, hashing."""

    def __init__(self, master_key: bytes) -> None:
        if len(master_key) != 32:
            raise CryptoError("the master key must be 32 bytes")
        self._wrapper = AESGCM(_hkdf(master_key, b"gmem/v1/wrap"))
        self._index_root = _hkdf(master_key, b"gmem/v1/index")
        self._index_keys: dict[str, _TermHasher] = {}
        self._check = (
            CHECK_FORMAT
            + hmac.digest(_hkdf(master_key, b"gmem/v1/check"), CHECK_LABEL, "sha256").hex()
        )
        # Unwrapped data keys and their derived hash keys, by key id, for a short while:
        # another instance may destroy a key at any moment, and the service re-reads the
        # key row before every use, so a cached raw key only saves the unwrap; the time
        # limit bounds how long a destroyed key's bytes can linger in this process.
        self._unwrapped: dict[bytes, tuple[float, bytes]] = {}
        self._hash_keys: dict[bytes, tuple[float, bytes]] = {}

    def check_value(self) -> str:
        """A value that tells this master key from another without revealing it: HMAC-
        SHA-256 of a fixed label under a key derived from the master key. A store records
        it at its first start, so a start with another master key is refused."""
        return self._check

    # -- subject keys ---------------------------------------------------------------------

    def new_subject_key(self, tenant_id: str, subject_id: str) -> SubjectKey:
        """A fresh random data key for a subject, wrapped for storage."""
        key_id = secrets.token_bytes(KEY_ID_BYTES)
        nonce = secrets.token_bytes(NONCE_BYTES)
        data_key = AESGCM.generate_key(bit_length=256)
        wrapped = nonce + self._wrapper.encrypt(
            nonce, data_key, _aad(tenant_id, subject_id, key_id.hex())
        )
        return SubjectKey(tenant_id, subject_id, key_id, wrapped)

    def unwrap(self, key: SubjectKey) -> bytes:
        """The raw data key of a stored subject key (cached by key id)."""
        cached = _fresh(self._unwrapped, key.key_id)
        if cached is not None:
            return cached
        nonce, body = key.wrapped[:NONCE_BYTES], key.wrapped[NONCE_BYTES:]
        try:
            raw = self._wrapper.decrypt(
                nonce, body, _aad(key.tenant_id, key.subject_id, key.key_id.hex())
            )
        except InvalidTag:
            raise CryptoError("a subject key failed authentication under the master key") from None
        _remember(self._unwrapped, key.key_id, raw)
        return raw

    def forget_cached(self, key_id: bytes) -> None:
        """Drop a destroyed key from the caches so it cannot outlive its row."""
        self._unwrapped.pop(key_id, None)
        self._hash_keys.pop(key_id, None)

    # -- item keys ----------------------------------------------------------------------

    def new_item_key(self, subject: SubjectKey, memory_id: str) -> tuple[ItemKey, SealingKey]:
        """A fresh random key for a new item, wrapped under its subject's key for storage,
        and ready to seal with."""
        key_id = secrets.token_bytes(KEY_ID_BYTES)
        nonce = secrets.token_bytes(NONCE_BYTES)
        raw = AESGCM.generate_key(bit_length=256)
        aad = _aad(subject.tenant_id, subject.subject_id, memory_id, key_id.hex())
        wrapped = nonce + AESGCM(self.unwrap(subject)).encrypt(nonce, raw, aad)
        stored = ItemKey(subject.tenant_id, memory_id, subject.subject_id, key_id, wrapped)
        _remember(self._unwrapped, key_id, raw)
        return stored, SealingKey(subject.tenant_id, memory_id, key_id, raw, ITEM_BLOB)

    def item_sealing_key(self, subject: SubjectKey, item: ItemKey) -> SealingKey:
        """The key that seals the item's content, unwrapped with its subject's key."""
        raw = _fresh(self._unwrapped, item.key_id)
        if raw is None:
            nonce, body = item.wrapped[:NONCE_BYTES], item.wrapped[NONCE_BYTES:]
            aad = _aad(item.tenant_id, item.subject_id, item.memory_id, item.key_id.hex())
            try:
                raw = AESGCM(self.unwrap(subject)).decrypt(nonce, body, aad)
            except InvalidTag:
                raise CryptoError(
                    f"memory {item.memory_id!r}: its key failed authentication"
                ) from None
            _remember(self._unwrapped, item.key_id, raw)
        return SealingKey(item.tenant_id, item.memory_id, item.key_id, raw, ITEM_BLOB)

    def subject_sealing_key(self, subject: SubjectKey, memory_id: str) -> SealingKey:
        """The subject's key as the sealing key of an item written before items had keys."""
        raw = self.unwrap(subject)
        return SealingKey(subject.tenant_id, memory_id, subject.key_id, raw, SUBJECT_BLOB)

    # -- content --------------------------------------------------------------------------

    def seal(self, key: SealingKey, version: int, data: bytes, purpose: str = "content") -> bytes:
        """Encrypt ``data`` for (tenant, memory id, version, purpose) under ``key``."""
        nonce = secrets.token_bytes(NONCE_BYTES)
        aad = _aad(key.tenant_id, key.memory_id, str(version), purpose)
        plaintext = pad(data) if key.blob_format == ITEM_BLOB else data
        body = AESGCM(key.secret).encrypt(nonce, plaintext, aad)
        return bytes([key.blob_format]) + key.key_id + nonce + body

    def open(self, key: SealingKey, version: int, blob: bytes, purpose: str = "content") -> bytes:
        """Decrypt a sealed blob; tampering or a wrong key raises :class:`CryptoError`."""
        memory_id = key.memory_id
        if len(blob) < 1 + KEY_ID_BYTES + NONCE_BYTES + 16 or blob[0] != key.blob_format:
            raise CryptoError(f"memory {memory_id!r}: sealed content is malformed")
        if not hmac.compare_digest(self.key_id_of(blob), key.key_id):
            raise CryptoError(f"memory {memory_id!r}: sealed under a key that no longer exists")
        nonce = blob[1 + KEY_ID_BYTES : 1 + KEY_ID_BYTES + NONCE_BYTES]
        body = blob[1 + KEY_ID_BYTES + NONCE_BYTES :]
        aad = _aad(key.tenant_id, memory_id, str(version), purpose)
        try:
            plaintext = AESGCM(key.secret).decrypt(nonce, body, aad)
        except InvalidTag:
            raise CryptoError(
                f"memory {memory_id!r}: sealed content failed authentication"
            ) from None
        return unpad(plaintext) if key.blob_format == ITEM_BLOB else plaintext

    @staticmethod
    def blob_format(blob: bytes) -> int:
        """How a blob was sealed: :data:`ITEM_BLOB`, :data:`SUBJECT_BLOB` (or garbage)."""
        return blob[0] if blob else 0

    @staticmethod
    def key_id_of(blob: bytes) -> bytes:
        """The id of the key a blob was sealed with."""
        return blob[1 : 1 + KEY_ID_BYTES]

    def content_hash(self, key: SealingKey, content: str) -> str:
        """HMAC-SHA-256 of the NFC content under a key derived from the sealing key."""
        hash_key = _fresh(self._hash_keys, key.key_id)
        if hash_key is None:
            hash_key = _hkdf(key.secret, b"gmem/v1/content-hash")
            _remember(self._hash_keys, key.key_id, hash_key)
        return hmac.digest(hash_key, content.encode("utf-8"), "sha256").hex()

    # -- search terms ---------------------------------------------------------------------

    def term_ids(self, tenant_id: str, words: list[str]) -> list[int]:
        """Signed 64-bit keyed hashes of search terms, under the tenant's index key."""
        # No cache of words: it would keep plaintext of content in memory past a forget.
        hasher = self._index_keys.get(tenant_id)
        if hasher is None:
            key = _hkdf(self._index_root, b"tenant\x00" + tenant_id.encode("utf-8"))
            hasher = self._index_keys[tenant_id] = _TermHasher(key)
        return hasher.ids(words)
