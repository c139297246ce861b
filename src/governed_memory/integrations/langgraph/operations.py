"""LangGraph's four operations on governed memory, one method each (blocking).

Every call goes through a :class:`~.backends.Backend`, as one principal, so every rule of
the service applies: scope, agent binding, trust cap, quarantine, versions, four eyes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import Item, ListNamespacesOp, PutOp, SearchItem, SearchOp

from governed_memory.core.model import MemoryItem
from governed_memory.core.values import Status, Trust
from governed_memory.errors import InvalidTransition
from governed_memory.integrations.langgraph.backends import Backend
from governed_memory.integrations.langgraph.filters import matches, namespace_matches
from governed_memory.integrations.langgraph.keys import KeyState, resolve
from governed_memory.integrations.langgraph.mapping import (
    Envelope,
    ItemFields,
    KeyIds,
    NamespaceMap,
    Scope,
    SearchScope,
    check_secret,
    open_envelope,
    seal_envelope,
)

#: What a put gives a memory: fixed fields, or a function of (namespace, key, value).
FieldsOf = ItemFields | Callable[[tuple[str, ...], str, Mapping[str, Any]], ItemFields]
#: The most a ranked search asks the service for: its best this many of the scope.
RANKED = 100
#: The token budget of a ranked search: the service's ceiling, so the limit decides.
BUDGET = 32_000


@dataclass(frozen=True, slots=True)
class Settings:
    """How the store maps LangGraph onto governed memory (see :class:`~.GovernedStore`)."""

    namespaces: NamespaceMap
    fields: FieldsOf
    key_secret: bytes

    def __post_init__(self) -> None:
        check_secret(self.key_secret)

    def fields_of(
        self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any]
    ) -> ItemFields:
        fields = self.fields
        return fields if isinstance(fields, ItemFields) else fields(namespace, key, value)


class IdTaken(InvalidTransition):
    """The id a new memory of a key gets is held by a memory the store's principal cannot
    see: written by another agent of the tenant that holds the key secret. Writing the
    same id again cannot succeed."""


class Operations:
    """Get, put (and delete), search and list namespaces over one backend."""

    def __init__(self, backend: Backend, settings: Settings) -> None:
        self.backend = backend
        self.settings = settings

    # -- get, put, delete -----------------------------------------------------------------

    def get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        """The key's visible memory as a LangGraph item: never a quarantined write."""
        state = self._state(namespace, key)
        return None if state.visible is None else _item(state.visible, namespace, key)

    def put(self, op: PutOp) -> None:
        """Create, rewrite, correct or (value ``None``) delete the key's memory."""
        if op.value is None:
            return self.delete(op.namespace, op.key)
        namespace, key, value = op.namespace, op.key, op.value
        scope = self.settings.namespaces.scope(namespace)
        fields = self.settings.fields_of(namespace, key, value)
        request = fields.request() | scope._asdict()
        request["content"] = seal_envelope(namespace, key, value)
        if op.ttl is not None:
            request["ttl_seconds"] = max(1, math.ceil(op.ttl * 60))
        state = self._state(namespace, key, scope)
        memory_id, expected, supersedes = _target(state, fields.trust)
        if supersedes is not None:
            request["supersedes_id"] = supersedes
        try:
            self.backend.write(memory_id, request | {"expected_version": expected})
        except InvalidTransition:
            if expected == 0 and self.backend.get(memory_id) is None:
                raise IdTaken(
                    f"memory id {memory_id!r} of this key is held by a memory this principal "
                    "cannot see (another agent's); the key cannot be written until that "
                    "memory is erased"
                ) from None
            raise
        return None

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Erase every generation of the key not deleted yet, newest first: its visible
        memory, a pending correction, and what corrections superseded, reviewers rejected
        or time expired, so that no version of any value stays readable."""
        for memory_id in self._state(namespace, key).generations():
            memory = self.backend.get(memory_id)
            if memory is not None and memory.status is not Status.DELETED:
                self.backend.erase(memory_id)

    def _state(self, namespace: tuple[str, ...], key: str, scope: Scope | None = None) -> KeyState:
        """The key's memories, found by the ids of its scope (the namespace must name one)."""
        scope = scope or self.settings.namespaces.scope(namespace)
        ids = KeyIds.of(scope, namespace, key, self.settings.key_secret)
        return resolve(self.backend, ids)

    # -- search and list ------------------------------------------------------------------

    def search(self, op: SearchOp) -> list[SearchItem]:
        """Ranked by the service when there is a query, newest first without one; the
        namespace prefix and the filter then select, offset and limit page."""
        scope = self.settings.namespaces.search_scope(op.namespace_prefix)
        if op.query:
            found = self._ranked(scope, op)
        else:
            newest = sorted(self._active(scope._asdict()), key=_recency, reverse=True)
            found = _select(op, [(memory, None) for memory in newest])
        return found[op.offset : op.offset + op.limit]

    def _ranked(self, scope: SearchScope, op: SearchOp) -> list[SearchItem]:
        """The service's best ``offset + limit`` memories of the scope that pass the rest of
        the prefix and the filter: asked for that many first, and for its best
        :data:`RANKED` only if the prefix or the filter left too few."""
        assert op.query is not None
        request: dict[str, Any] = {"agent_id": scope.agent_id, "purpose": scope.purpose}
        request |= {"query": op.query, "token_budget": BUDGET}
        if scope.subject_id is not None:
            request["subject_id"] = scope.subject_id
        wanted = max(1, op.offset + op.limit)
        for limit in sorted({min(wanted, RANKED), RANKED}):
            result = self.backend.search(request | {"limit": limit})
            found = _select(op, [(hit.item, hit.score) for hit in result.items])
            if len(found) >= wanted or (len(result.items) < limit and not result.skipped):
                break
        return found

    def list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        """The namespaces of the visible memories of the agent the prefix (or the map)
        names, filtered, cut at ``max_depth``, sorted and paged."""
        conditions = op.match_conditions or ()
        prefix = next((c.path for c in conditions if c.match_type == "prefix"), ())
        agent, purpose, subject = self.settings.namespaces.browse_scope(prefix)
        if agent is None:
            raise ValueError("list_namespaces names an agent: give a prefix that reaches it")
        filters = {"agent_id": agent, "purpose": purpose, "subject_id": subject}
        found = {
            envelope.namespace[: op.max_depth] if op.max_depth else envelope.namespace
            for memory in self._active(filters)
            if (envelope := open_envelope(memory.content)) is not None
            and all(namespace_matches(envelope.namespace, c.match_type, c.path) for c in conditions)
        }
        return sorted(found)[op.offset : op.offset + op.limit]

    def _active(self, filters: Mapping[str, str | None]) -> Iterator[MemoryItem]:
        """Every active memory passing ``filters``, page by page."""
        cursor: str | None = None
        while True:
            page = self.backend.browse(dict(filters) | {"status": Status.ACTIVE.value}, cursor)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor


def _select(op: SearchOp, hits: Sequence[tuple[MemoryItem, float | None]]) -> list[SearchItem]:
    """The hits this adapter wrote, under the namespace prefix, passing the filter."""
    prefix = op.namespace_prefix
    return [
        _search_item(memory, envelope, score)
        for memory, score in hits
        if (envelope := open_envelope(memory.content)) is not None
        and tuple(envelope.namespace[: len(prefix)]) == prefix
        and matches(envelope.value, op.filter)
    ]


def _target(state: KeyState, trust: Trust) -> tuple[str, int, str | None]:
    """Which id a put writes, at which expected version, correcting which memory."""
    latest, visible = state.latest, state.visible
    if latest is not None and latest.status is Status.QUARANTINED:
        return latest.id, latest.version, None  # rework the pending proposal
    if visible is not None and trust is Trust.UNTRUSTED:
        return state.next_id, 0, visible.id  # propose a correction for review
    if visible is not None:
        return visible.id, visible.version, None  # rewrite in place
    return state.next_id, 0, None


def _recency(memory: MemoryItem) -> tuple[Any, str]:
    return memory.updated_at, memory.id


def _item(memory: MemoryItem, namespace: Sequence[str], key: str) -> Item | None:
    envelope = open_envelope(memory.content)
    if envelope is None or envelope.namespace != tuple(namespace) or envelope.key != key:
        return None
    return Item(
        value=envelope.value,
        key=key,
        namespace=tuple(namespace),
        created_at=memory.created_at,
        updated_at=memory.updated_at,
    )


def _search_item(memory: MemoryItem, envelope: Envelope, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=envelope.namespace,
        key=envelope.key,
        value=envelope.value,
        created_at=memory.created_at,
        updated_at=memory.updated_at,
        score=score,
    )
