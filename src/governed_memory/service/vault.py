"""The vault: subject keys, and content sealed or opened with them, in one place.

Each subject of a tenant has its own data key, wrapped under the master key and kept by
the store; forgetting a subject destroys that key, and with it every blob it sealed
(SPEC §7). Everything that touches a subject key goes through :class:`Vault`: minting it
on the first write, sealing content and rejection reasons, the keyed content hash,
opening blobs again (sharing key lookups within one request), and the keyed search terms.
"""

from __future__ import annotations

import logging
import sys
from array import array
from collections.abc import Collection, Sequence

from governed_memory.analysis import Analyzer
from governed_memory.core.lifecycle import SealedContent
from governed_memory.core.model import ItemState
from governed_memory.core.values import Status
from governed_memory.crypto import Keyring
from governed_memory.errors import CryptoError
from governed_memory.ports import Store
from governed_memory.records import IndexDoc, SealedVector, SubjectKey

log = logging.getLogger("governed_memory.service")

#: Subject keys looked up during one request, by (tenant, subject); ``None``: none left.
#: It lives only as long as that request, so a forget is never outlived by a cached key.
KeyCache = dict[tuple[str, str], SubjectKey | None]


class Vault:
    """Subject keys and the content they seal, over one store and one keyring."""

    def __init__(self, store: Store, keyring: Keyring) -> None:
        self._store = store
        self._keyring = keyring

    # -- keys -----------------------------------------------------------------------------

    def subject_key(self, tenant: str, subject: str) -> SubjectKey | None:
        """The subject's live key, ``None`` if it has none (never written, or forgotten)."""
        return self._store.subject_key(tenant, subject)

    def subject_key_or_new(self, tenant: str, subject: str) -> SubjectKey:
        """The subject's key, minted now if it has none (a concurrent mint wins alike)."""
        key = self._store.subject_key(tenant, subject)
        if key is None:
            key = self._store.add_subject_key(self._keyring.new_subject_key(tenant, subject))
        return key

    def destroyed(self, key: SubjectKey) -> None:
        """Drop what the keyring caches of a key the store has just destroyed."""
        self._keyring.forget_cached(key.key_id)

    def check_wrapped(self, key: SubjectKey) -> None:
        """Raise :class:`CryptoError` unless ``key`` unwraps under this master key."""
        self._keyring.unwrap(key)

    # -- sealing --------------------------------------------------------------------------

    def seal_content(
        self, key: SubjectKey, memory_id: str, version: int, content: str, tokens: int
    ) -> SealedContent:
        """Content sealed for the item version a write produces, with its keyed hash."""
        blob = self._keyring.seal(key, memory_id, version, content)
        return SealedContent(blob, self._keyring.content_hash(key, content), tokens)

    def seal_reason(self, key: SubjectKey, item: ItemState, reason: str) -> bytes:
        """A rejection reason sealed like content, for the version the rejection produces."""
        return self._keyring.seal(key, item.id, item.version + 1, reason, purpose="reason")

    def content_hash(self, key: SubjectKey | None, content: str) -> str:
        """The keyed hash of ``content`` under the subject's key; empty without a key."""
        return "" if key is None else self._keyring.content_hash(key, content)

    # -- opening --------------------------------------------------------------------------

    def prefetch(self, tenant: str, subjects: Collection[str]) -> KeyCache:
        """A request's key cache, filled with the keys of ``subjects`` in one read."""
        found = self._store.subject_keys_for(tenant, sorted(subjects))
        return {(tenant, subject): found.get(subject) for subject in subjects}

    def decrypt(self, state: ItemState, keys: KeyCache | None = None) -> str | None:
        """The plaintext of an item, ``None`` if deleted or its subject's key is gone.

        ``keys`` lets one request share its subject-key lookups between items.
        """
        if state.content is None:
            return None
        wanted = (state.tenant_id, state.subject_id)
        key = keys[wanted] if keys is not None and wanted in keys else self.subject_key(*wanted)
        if keys is not None:
            keys[wanted] = key
        if key is None or key.key_id != Keyring.key_id_of(state.content):
            if self._forgotten_meanwhile(state):
                return None  # the key is destroyed: the content is unrecoverable by design
            # A live item whose blob names a key its subject does not have: the blob was
            # altered or moved from another subject's item. An error, never "no content".
            log.error("sealed content names a foreign key", extra={"memory_id": state.id})
            raise CryptoError(f"memory {state.id!r}: sealed content failed authentication")
        try:
            return self._keyring.open(key, state.id, state.content_version, state.content)
        except CryptoError:
            log.error("sealed content failed authentication", extra={"memory_id": state.id})
            raise

    def open_with(self, key: SubjectKey | None, state: ItemState) -> str | None:
        """The plaintext of ``state`` if ``key`` sealed it; ``None`` if that key is gone."""
        if state.content is None or key is None or key.key_id != Keyring.key_id_of(state.content):
            return None
        return self._keyring.open(key, state.id, state.content_version, state.content)

    def _forgotten_meanwhile(self, state: ItemState) -> bool:
        """Whether ``state`` (read before its subject's key was looked up) is gone by now.

        A forget between reading an item and reading its key deletes the item and the key
        in one commit: the item read again is deleted (or its content is no longer the
        one read). Only a live item still holding the very same blob is suspicious.
        """
        current = self._store.get(state.tenant_id, state.id)
        if current is None or current.status is Status.DELETED:
            return True
        return current.content != state.content

    # -- search terms ---------------------------------------------------------------------

    def term_ids(self, tenant: str, words: list[str]) -> list[int]:
        """The tenant's keyed ids of search terms (no plaintext word is ever stored)."""
        return self._keyring.term_ids(tenant, words)

    def index_doc(self, tenant: str, analyzer: Analyzer, content: str) -> IndexDoc:
        """The search postings of a text, its terms by ``analyzer``, under the tenant's
        index key."""
        counts = analyzer.index_terms(content)
        words = list(counts)
        merged: dict[int, int] = {}
        for term_id, word in zip(self.term_ids(tenant, words), words, strict=True):
            merged[term_id] = merged.get(term_id, 0) + counts[word]
        return IndexDoc(merged, sum(counts.values()))

    # -- vectors (semantic recall) --------------------------------------------------------

    def seal_vector(
        self, key: SubjectKey, memory_id: str, version: int, vector: Sequence[float]
    ) -> bytes:
        """An item's vector sealed like its content: a vector is content (SPEC §6.2), so it
        is unreadable once the key that sealed the content is destroyed.

        ``version`` is the content's version (the one whose text the vector embeds); the
        associated data binds the blob to tenant, memory id, that version and "vector".
        """
        raw = array("f", vector)
        if sys.byteorder == "big":
            raw.byteswap()  # stored little-endian, whatever the machine
        # The keyring seals text: the float32 bytes travel as the Latin-1 characters of the
        # same code points (one byte each way, unlike base64 a plain copy to decode, which
        # matters when a search opens every vector of its scope).
        packed = raw.tobytes().decode("latin-1")
        return self._keyring.seal(key, memory_id, version, packed, purpose="vector")

    def open_vector(self, keys: KeyCache, sealed: SealedVector) -> array[float]:
        """The vector of an item the store returned as eligible, opened with the request's
        key cache. Its subject's key must be there (the item is active): anything else is
        tampering and raises :class:`CryptoError`."""
        key = keys.get((sealed.tenant_id, sealed.subject_id))
        if key is None:
            log.error("a sealed vector names no key", extra={"memory_id": sealed.memory_id})
            raise CryptoError(f"memory {sealed.memory_id!r}: sealed vector failed authentication")
        packed = self._keyring.open(
            key, sealed.memory_id, sealed.version, sealed.blob, purpose="vector"
        )
        vector = array("f")
        vector.frombytes(packed.encode("latin-1"))
        if sys.byteorder == "big":
            vector.byteswap()
        return vector
