"""The vault: subject keys, item keys, and content sealed or opened with them, in one place.

Each subject of a tenant has its own data key, wrapped under the master key; each item has
a key of its own, wrapped under its subject's key, that seals every version of the item
(SPEC §7). Forgetting a subject destroys its key and its items' keys; erasing an item, or
its retention window running out, destroys that item's key alone. Items written before
items had keys of their own stay sealed under the subject key ("legacy" items).

Everything that touches those keys goes through :class:`Vault`: minting them, sealing
content and rejection reasons (and anything else sealed like content), the keyed content
hash, opening blobs again (sharing key lookups within one request), and the keyed search
terms.
"""

from __future__ import annotations

import logging
import sys
import time
from array import array
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from governed_memory.analysis import Analyzer
from governed_memory.core.events import MemoryRejected
from governed_memory.core.lifecycle import SealedContent
from governed_memory.core.model import ItemState
from governed_memory.core.values import Status
from governed_memory.crypto import (
    ITEM_BLOB,
    KEY_CACHE_SECONDS,
    KEY_CACHE_SIZE,
    MASTER_KEY_CHECK,
    SUBJECT_BLOB,
    Keyring,
    SealingKey,
)
from governed_memory.errors import CryptoError, SubjectKeyGone, ValidationError
from governed_memory.ports import Store
from governed_memory.records import IndexDoc, ItemKey, SealedVector, SubjectKey

log = logging.getLogger("governed_memory.service")

K = TypeVar("K", SubjectKey, ItemKey)


@dataclass
class KeyCache:
    """Keys looked up during one request: subject keys by (tenant, subject), item keys by
    (tenant, memory id); ``None`` where there is none (never made, or destroyed). It lives
    only as long as that request, so a destroyed key never outlives the request that saw it.
    """

    subjects: dict[tuple[str, str], SubjectKey | None] = field(default_factory=dict)
    items: dict[tuple[str, str], ItemKey | None] = field(default_factory=dict)


class Vault:
    """Subject and item keys and the content they seal, over one store and one keyring."""

    def __init__(self, store: Store, keyring: Keyring) -> None:
        self._store = store
        self._keyring = keyring
        # Subject keys a commit of this process required and found live, by (tenant,
        # subject), each until KEY_CACHE_SECONDS after that commit, as the keyring keeps
        # raw keys: a create of a new item of such a subject needs no read first (its
        # commit checks the key again). A forget in this process drops its subject's
        # entry; one elsewhere is caught by that check, and its wrapped key lingers here
        # no longer than the time bound. Key ids point back at their entries for that.
        self._confirmed: dict[tuple[str, str], tuple[float, SubjectKey]] = {}
        self._confirmed_ids: dict[bytes, tuple[str, str]] = {}
        # Keys this process destroyed, oldest first (at most KEY_CACHE_SIZE): a commit that
        # found a key live just before a forget here destroyed it must not confirm it after.
        self._destroyed_ids: dict[bytes, None] = {}

    # -- keys -----------------------------------------------------------------------------

    def confirmed_key(self, tenant: str, subject: str) -> SubjectKey | None:
        """The subject's key as a commit of this process last found it live, within the
        time bound; ``None`` if there is none, or it is older."""
        entry = self._confirmed.get((tenant, subject))
        if entry is None:
            return None
        if entry[0] < time.monotonic():
            self._drop_confirmed(entry[1])
            return None
        return entry[1]

    def confirm(self, key: SubjectKey) -> None:
        """Remember ``key``: a commit that required it just succeeded, so it was live
        then; unless this process has destroyed it since (a forget that ran between that
        commit and this call)."""
        if key.key_id in self._destroyed_ids:
            return
        if len(self._confirmed) >= KEY_CACHE_SIZE:
            self._confirmed.clear()
            self._confirmed_ids.clear()
        at = (key.tenant_id, key.subject_id)
        replaced = self._confirmed.get(at)
        if replaced is not None and replaced[1].key_id != key.key_id:
            self._confirmed_ids.pop(replaced[1].key_id, None)
        self._confirmed[at] = (time.monotonic() + KEY_CACHE_SECONDS, key)
        self._confirmed_ids[key.key_id] = at

    def unconfirm(self, key: SubjectKey) -> None:
        """Forget ``key`` as confirmed: a commit found it destroyed."""
        self._drop_confirmed(key)

    def _drop_confirmed(self, key: SubjectKey) -> None:
        at = (key.tenant_id, key.subject_id)
        entry = self._confirmed.get(at)
        if entry is not None and entry[1].key_id == key.key_id:
            self._confirmed.pop(at, None)
        self._confirmed_ids.pop(key.key_id, None)

    def subject_key(self, tenant: str, subject: str) -> SubjectKey | None:
        """The subject's live key, ``None`` if it has none (never written, or forgotten)."""
        return self._store.subject_key(tenant, subject)

    def subject_key_or_new(self, tenant: str, subject: str) -> SubjectKey:
        """The subject's key, minted now if it has none (a concurrent mint wins alike)."""
        key = self._store.subject_key(tenant, subject)
        if key is None:
            key = self._store.add_subject_key(self._keyring.new_subject_key(tenant, subject))
        return key

    def destroyed(self, key_id: bytes) -> None:
        """Drop what this process holds of a key the store has just destroyed."""
        self._destroyed_ids[key_id] = None
        if len(self._destroyed_ids) > KEY_CACHE_SIZE:
            del self._destroyed_ids[next(iter(self._destroyed_ids))]
        self._keyring.forget_cached(key_id)
        at = self._confirmed_ids.pop(key_id, None)
        entry = None if at is None else self._confirmed.get(at)
        if entry is not None and entry[1].key_id == key_id:
            self._confirmed.pop((entry[1].tenant_id, entry[1].subject_id), None)

    def bind(self) -> None:
        """Bind the store to this master key if nothing has (its check value, first claim
        wins); refuse a store bound to another (``gmem import`` binds only now)."""
        wanted = self._keyring.check_value()
        if self._store.claim_meta(MASTER_KEY_CHECK, wanted) != wanted:
            raise ValidationError(
                "this store was bound to another master key during the import: import "
                "into an empty store, with the master key the export was made under"
            )

    def check_wrapped(self, key: SubjectKey) -> None:
        """Raise :class:`CryptoError` unless ``key`` unwraps under this master key."""
        self._keyring.unwrap(key)

    def check_item_key(self, subject: SubjectKey, item: ItemKey) -> None:
        """Raise :class:`CryptoError` unless ``item`` unwraps under its subject's key."""
        self._keyring.item_sealing_key(subject, item)

    @staticmethod
    def is_legacy(state: ItemState) -> bool:
        """Whether the item's content is sealed under its subject's key (written before
        items had keys of their own), so that it cannot be destroyed alone."""
        return state.content is not None and Keyring.blob_format(state.content) == SUBJECT_BLOB

    def key_for_write(
        self, subject: SubjectKey, memory_id: str, current: ItemState | None
    ) -> tuple[SealingKey, ItemKey | None]:
        """The key that seals a write of ``memory_id``, and the item key to store with it
        when the write creates the item (a fresh one, wrapped under ``subject``).

        A rewrite reuses the item's key; an item written before items had keys keeps
        being sealed under its subject's key. ``SubjectKeyGone`` if the item's key is
        gone meanwhile (the write is then decided again).
        """
        if current is None:
            stored, key = self._keyring.new_item_key(subject, memory_id)
            return key, stored
        if self.is_legacy(current):
            return self._keyring.subject_sealing_key(subject, memory_id), None
        item = self._store.item_key(subject.tenant_id, memory_id)
        if item is None:
            raise SubjectKeyGone(f"the key of memory {memory_id!r} was destroyed")
        return self._keyring.item_sealing_key(subject, item), None

    def content_key(self, state: ItemState, keys: KeyCache | None = None) -> SealingKey | None:
        """The key that sealed the item's current content; ``None`` once it is gone."""
        if state.content is None:
            return None
        return self._key_of(state.tenant_id, state.subject_id, state.id, state.content, keys)

    # -- sealing --------------------------------------------------------------------------

    def seal(self, key: SealingKey, version: int, data: bytes, purpose: str) -> bytes:
        """``data`` sealed for the item version that produces it, for one ``purpose``
        (``content``, ``reason``…): the one sealing method for whatever is content."""
        return self._keyring.seal(key, version, data, purpose)

    def seal_content(
        self, key: SealingKey, version: int, content: str, tokens: int
    ) -> SealedContent:
        """Content sealed for the item version a write produces, with its keyed hash."""
        blob = self.seal(key, version, content.encode("utf-8"), "content")
        return SealedContent(blob, self._keyring.content_hash(key, content), tokens)

    def seal_vector(self, key: SealingKey, version: int, vector: Sequence[float]) -> bytes:
        """An item's vector (semantic recall) sealed like its content, for the content
        version whose text it embeds: a vector is content, unreadable once that key is
        destroyed (forget, erase, retention)."""
        raw = array("f", vector)
        if sys.byteorder == "big":
            raw.byteswap()  # stored little-endian, whatever the machine
        return self.seal(key, version, raw.tobytes(), "vector")

    def seal_reason(self, key: SealingKey, item: ItemState, reason: str) -> bytes:
        """A rejection reason sealed like content, for the version the rejection produces."""
        return self.seal(key, item.version + 1, reason.encode("utf-8"), "reason")

    def content_hash(self, key: SealingKey | None, content: str) -> str:
        """The keyed hash of ``content`` under an item's sealing key; empty without one."""
        return "" if key is None else self._keyring.content_hash(key, content)

    # -- opening --------------------------------------------------------------------------

    def prefetch(
        self, tenant: str, subjects: Collection[str], memory_ids: Collection[str] = ()
    ) -> KeyCache:
        """A request's key cache, filled with the keys of ``subjects`` and of the items
        ``memory_ids`` (two reads in all)."""
        found = self._store.subject_keys_for(tenant, sorted(subjects))
        items = self._store.item_keys_for(tenant, sorted(memory_ids)) if memory_ids else {}
        return KeyCache(
            {(tenant, subject): found.get(subject) for subject in subjects},
            {(tenant, memory_id): items.get(memory_id) for memory_id in memory_ids},
        )

    def decrypt(self, state: ItemState, keys: KeyCache | None = None) -> str | None:
        """The plaintext of an item, ``None`` if its content or its key is gone.

        ``keys`` lets one request share its key lookups between items.
        """
        if state.content is None:
            return None
        key = self.content_key(state, keys)
        if key is None:
            if self._gone_meanwhile(state):
                return None  # the key is destroyed: the content is unrecoverable by design
            # A live item whose blob names a key it does not have: the blob was altered or
            # moved from another item. An error, never "no content".
            log.error("sealed content names a foreign key", extra={"memory_id": state.id})
            raise CryptoError(f"memory {state.id!r}: sealed content failed authentication")
        try:
            return self._keyring.open(key, state.content_version, state.content).decode("utf-8")
        except CryptoError:
            log.error("sealed content failed authentication", extra={"memory_id": state.id})
            raise

    def open_known(self, state: ItemState, keys: KeyCache) -> str | None:
        """The plaintext of ``state`` if ``keys`` hold the key that sealed it, else
        ``None`` (a rebuild: the keys are read once, nothing is read again)."""
        if state.content is None:
            return None
        key = self._key_of(state.tenant_id, state.subject_id, state.id, state.content, keys, False)
        if key is None:
            return None
        return self._keyring.open(key, state.content_version, state.content).decode("utf-8")

    def open_vector(self, sealed: SealedVector, keys: KeyCache) -> array[float]:
        """The vector of an item the store returned as eligible (active), opened with the
        request's keys. Its key must be there: anything else is tampering, and raises
        :class:`CryptoError`."""
        key = self._key_of(sealed.tenant_id, sealed.subject_id, sealed.memory_id, sealed.blob, keys)
        if key is None:
            log.error("a sealed vector names no live key", extra={"memory_id": sealed.memory_id})
            raise CryptoError(f"memory {sealed.memory_id!r}: sealed vector failed authentication")
        vector = array("f")
        vector.frombytes(self._keyring.open(key, sealed.version, sealed.blob, "vector"))
        if sys.byteorder == "big":
            vector.byteswap()
        return vector

    def open_reason(
        self, state: ItemState, event: MemoryRejected, keys: KeyCache | None = None
    ) -> str | None:
        """The reason of a rejection of the item ``state`` (as it is now); ``None`` if
        there is none, or once the item's content (and with it the reason) is destroyed."""
        if event.reason is None or state.content is None:
            return None
        key = self._key_of(state.tenant_id, state.subject_id, state.id, event.reason, keys)
        if key is None:
            return None
        return self._keyring.open(key, event.version, event.reason, "reason").decode("utf-8")

    def _key_of(
        self,
        tenant: str,
        subject: str,
        memory_id: str,
        blob: bytes,
        keys: KeyCache | None,
        fetch: bool = True,
    ) -> SealingKey | None:
        """The key a blob of the item names, if it still exists (looked up in ``keys``
        first, then, if ``fetch``, in the store); ``None`` if it is gone or another."""
        keys = KeyCache() if keys is None else keys
        subject_key = self._cached(keys.subjects, (tenant, subject), fetch, self._store.subject_key)
        blob_format, key_id = Keyring.blob_format(blob), Keyring.key_id_of(blob)
        if subject_key is None:
            return None
        if blob_format == SUBJECT_BLOB:
            if subject_key.key_id != key_id:
                return None
            return self._keyring.subject_sealing_key(subject_key, memory_id)
        if blob_format != ITEM_BLOB:
            raise CryptoError(f"memory {memory_id!r}: sealed content is malformed")
        item_key = self._cached(keys.items, (tenant, memory_id), fetch, self._store.item_key)
        if item_key is None or item_key.key_id != key_id or item_key.subject_id != subject:
            return None
        return self._keyring.item_sealing_key(subject_key, item_key)

    @staticmethod
    def _cached(
        cache: dict[tuple[str, str], K | None],
        at: tuple[str, str],
        fetch: bool,
        read: Callable[[str, str], K | None],
    ) -> K | None:
        """``cache[at]``, read (and kept) if it is not there yet and ``fetch`` allows."""
        if at not in cache:
            if not fetch:
                return None
            cache[at] = read(*at)
        return cache[at]

    def _gone_meanwhile(self, state: ItemState) -> bool:
        """Whether ``state`` (read before its keys were looked up) has lost its content
        since: forgotten, erased or past its retention window.

        Each of these destroys the key and changes the item in one commit: the item read
        again is deleted, or no longer holds the blob read. Only a live item still
        holding the very same blob is suspicious.
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
        ids = self.term_ids(tenant, words)
        merged = dict(zip(ids, counts.values(), strict=True))
        if len(merged) != len(words):  # two words of one id (a 64-bit clash): add them up
            merged = {}
            for term_id, word in zip(ids, words, strict=True):
                merged[term_id] = merged.get(term_id, 0) + counts[word]
        return IndexDoc(merged, sum(counts.values()))
