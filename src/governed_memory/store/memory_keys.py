"""The key tables of the in-memory reference store: subject keys, item keys, API keys,
console sessions and the facts about the store.
:class:`~governed_memory.store.memory.MemoryStore` derives from it and changes the key
tables inside its commits; everything here takes the store's lock.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime

from governed_memory.errors import ReadWouldWait
from governed_memory.records import ApiKey, ConsoleSession, ItemKey, SubjectKey


class MemoryKeys:
    """Subject keys, item keys, API keys, console sessions and store facts, in dictionaries."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._keys: dict[tuple[str, str], SubjectKey] = {}
        self._item_keys: dict[tuple[str, str], ItemKey] = {}
        self._api_keys: dict[str, ApiKey] = {}
        self._meta: dict[str, str] = {}
        self._sessions: dict[str, ConsoleSession] = {}

    def add_subject_key(self, key: SubjectKey) -> SubjectKey:
        with self._lock:
            return self._keys.setdefault((key.tenant_id, key.subject_id), key)

    def subject_key(self, tenant_id: str, subject_id: str) -> SubjectKey | None:
        with self._lock:
            return self._keys.get((tenant_id, subject_id))

    def subject_keys_for(self, tenant_id: str, subject_ids: Sequence[str]) -> dict[str, SubjectKey]:
        with self._lock:
            found = ((s, self._keys.get((tenant_id, s))) for s in set(subject_ids))
            return {s: key for s, key in found if key is not None}

    def subject_keys(self, limit: int | None = None) -> Iterator[SubjectKey]:
        with self._lock:
            return iter(list(self._keys.values())[:limit])

    def item_key(self, tenant_id: str, memory_id: str) -> ItemKey | None:
        with self._lock:
            return self._item_keys.get((tenant_id, memory_id))

    def item_keys_for(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, ItemKey]:
        with self._lock:
            found = ((i, self._item_keys.get((tenant_id, i))) for i in set(memory_ids))
            return {i: key for i, key in found if key is not None}

    def item_keys(self, limit: int | None = None) -> Iterator[ItemKey]:
        with self._lock:
            return iter([self._item_keys[k] for k in sorted(self._item_keys)][:limit])

    def import_item_keys(self, keys: Sequence[ItemKey]) -> None:
        with self._lock:
            for key in keys:
                if (key.tenant_id, key.memory_id) in self._item_keys:
                    raise ValueError("an item key is stored already")
            for key in keys:
                self._item_keys[(key.tenant_id, key.memory_id)] = key

    def add_api_key(self, key: ApiKey) -> None:
        with self._lock:
            if key.key_id in self._api_keys:
                raise ValueError("duplicate API key id")
            self._api_keys[key.key_id] = key

    def api_key(self, key_id: str, *, wait: bool = True) -> ApiKey | None:
        if not self._lock.acquire(blocking=wait):
            raise ReadWouldWait("a writer holds the store")
        try:
            return self._api_keys.get(key_id)
        finally:
            self._lock.release()

    def api_keys(self, tenant_id: str | None = None) -> list[ApiKey]:
        with self._lock:
            keys = [k for k in self._api_keys.values() if tenant_id in (None, k.tenant_id)]
            return sorted(keys, key=lambda k: (k.tenant_id, k.created_at, k.key_id))

    def revoke_api_key(self, key_id: str, at: datetime) -> bool:
        with self._lock:
            key = self._api_keys.get(key_id)
            if key is None:
                return False
            if key.revoked_at is None:
                self._api_keys[key_id] = dataclasses.replace(key, revoked_at=at)
            return True

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        with self._lock:
            key = self._api_keys.get(key_id)
            if key is not None and (key.last_used_at is None or key.last_used_at < at):
                self._api_keys[key_id] = dataclasses.replace(key, last_used_at=at)

    def add_console_session(self, session: ConsoleSession) -> None:
        with self._lock:
            if session.digest in self._sessions:
                raise ValueError("duplicate console session")
            self._sessions[session.digest] = session

    def console_session(self, digest: str) -> ConsoleSession | None:
        with self._lock:
            return self._sessions.get(digest)

    def touch_console_session(self, digest: str, at: datetime) -> None:
        with self._lock:
            session = self._sessions.get(digest)
            if session is not None and session.last_seen < at:
                self._sessions[digest] = dataclasses.replace(session, last_seen=at)

    def end_console_session(self, digest: str) -> None:
        with self._lock:
            self._sessions.pop(digest, None)

    def end_idle_console_sessions(self, seen_before: datetime) -> int:
        with self._lock:
            idle = [d for d, s in self._sessions.items() if s.last_seen < seen_before]
            for digest in idle:
                del self._sessions[digest]
            return len(idle)

    def meta(self, name: str) -> str | None:
        with self._lock:
            return self._meta.get(name)

    def claim_meta(self, name: str, value: str) -> str:
        with self._lock:
            return self._meta.setdefault(name, value)

    def replace_meta(self, name: str, value: str) -> None:
        with self._lock:
            self._meta[name] = value
