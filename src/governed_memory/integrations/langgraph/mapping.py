"""How LangGraph's namespaces, keys and values become governed memories, and back.

* A **namespace** names a scope: :class:`NamespaceMap` says, for each of ``agent_id``,
  ``purpose`` and ``subject_id``, either the position of the namespace that holds it or
  a fixed value. The whole namespace is kept too, inside the sealed content.
* A **key** becomes memory ids: ``lg-<digest>-<n>``, the digest an HMAC-SHA-256 of the
  scope (the agent first), the namespace and the key under a secret of at least
  :data:`MIN_SECRET` bytes, ``n`` the generation (a new one for each correction or
  re-creation after a delete). Any process holding the secret computes the same ids;
  nobody else can compute one, or tell a key or namespace from it.
* A **value** is stored with its namespace and key as the memory's content, a JSON
  document (:func:`seal_envelope`): content is the only field that is encrypted and
  destroyed on erasure, so nothing of a value stays behind in an identifier.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from governed_memory.core import values
from governed_memory.core.values import Kind, Trust

#: The prefix of every id this adapter assigns.
ID_PREFIX = "lg-"
#: The fewest bytes a key secret has.
MIN_SECRET = 16
#: A namespace position that the pattern of ``list_namespaces`` leaves open.
WILDCARD = "*"


class Scope(NamedTuple):
    """The (agent, purpose, subject) a namespace names."""

    agent_id: str
    purpose: str
    subject_id: str


class SearchScope(NamedTuple):
    """What a namespace prefix fixes of a scope: agent and purpose always, maybe the
    subject."""

    agent_id: str
    purpose: str
    subject_id: str | None


@dataclass(frozen=True, slots=True)
class NamespaceMap:
    """Where each field of our scope comes from: a position of the namespace (an int) or
    a fixed value (a str).

    ``NamespaceMap(agent_id="support-bot", purpose=0, subject_id=1)`` maps LangMem's
    ``("memories", "{langgraph_user_id}")`` to purpose ``memories`` and the user as the
    subject. A namespace shorter than a position it needs is refused.
    """

    agent_id: int | str
    purpose: int | str
    subject_id: int | str

    def __post_init__(self) -> None:
        for name, check in CHECKS.items():
            source = getattr(self, name)
            if isinstance(source, bool) or (isinstance(source, int) and source < 0):
                raise ValueError(f"{name}: a position is an integer of 0 or more")
            if isinstance(source, str):
                check(source, name)

    def scope(self, namespace: Sequence[str]) -> Scope:
        """The scope of a namespace that must name all of it (put and get)."""
        agent, purpose, subject = (self._field(name, namespace) for name in CHECKS)
        if agent is None or purpose is None or subject is None:
            raise ValueError(f"the namespace needs at least {self.depth} labels")
        return Scope(agent, purpose, subject)

    def search_scope(self, prefix: Sequence[str]) -> SearchScope:
        """What a namespace prefix fixes; a search must fix the agent and the purpose (its
        hard filters), so a prefix shorter than their positions is refused."""
        agent, purpose, subject = (self._field(name, prefix) for name in CHECKS)
        if agent is None or purpose is None:
            raise ValueError(
                "a search names its scope: the namespace prefix must reach the agent and "
                "the purpose"
            )
        return SearchScope(agent, purpose, subject)

    def browse_scope(self, prefix: Sequence[str]) -> tuple[str | None, str | None, str | None]:
        """The fields a prefix pattern of ``list_namespaces`` fixes (any may be open)."""
        found = (self._field(name, prefix) for name in CHECKS)
        return tuple(found)  # type: ignore[return-value]

    @property
    def depth(self) -> int:
        """How many labels a namespace needs at least."""
        positions = [
            s for s in (self.agent_id, self.purpose, self.subject_id) if isinstance(s, int)
        ]
        return max(positions, default=-1) + 1

    def _field(self, name: str, labels: Sequence[str]) -> str | None:
        source = getattr(self, name)
        if isinstance(source, str):
            return source
        if source >= len(labels) or labels[source] == WILDCARD:
            return None
        return CHECKS[name](labels[source], name)


CHECKS = {
    "agent_id": values.agent_id,
    "purpose": values.purpose,
    "subject_id": values.subject_id,
}


@dataclass(frozen=True, slots=True)
class ItemFields:
    """The governed fields a put gives a memory besides its content and scope: ``kind``
    (and so its TTL policy), the ``trust`` it claims (``untrusted``: it waits for review),
    ``confidence`` and ``provenance``. Kind and trust may be given as their names."""

    kind: Kind = Kind.FACT
    trust: Trust = Trust.UNTRUSTED
    confidence: float = 0.5
    provenance: Mapping[str, str] = field(
        default_factory=lambda: {"source": "langgraph", "ref": "store"}
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", values.enum_value(Kind, self.kind, "kind"))
        object.__setattr__(self, "trust", values.enum_value(Trust, self.trust, "trust"))

    def request(self) -> dict[str, Any]:
        """These fields as members of a write request."""
        return {
            "kind": self.kind.value,
            "trust": self.trust.value,
            "confidence": self.confidence,
            "provenance": dict(self.provenance),
        }


class Envelope(NamedTuple):
    """What a memory written by this adapter holds: the LangGraph item."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]


def seal_envelope(namespace: Sequence[str], key: str, value: Mapping[str, Any]) -> str:
    """The content of a memory: the value first (what search ranks), then where it lives.

    Non-ASCII text stays as it is (the analyzer needs the words); strings are normalized
    to NFC by the service, as all content is.
    """
    document = {"value": dict(value), "namespace": list(namespace), "key": key}
    return json.dumps(document, ensure_ascii=False)


def open_envelope(content: str | None) -> Envelope | None:
    """The LangGraph item a memory's content holds; ``None`` if it holds none (content
    withheld or destroyed, or a memory this adapter did not write)."""
    if content is None:
        return None
    try:
        document = json.loads(content)
    except ValueError:
        return None
    if not isinstance(document, dict) or set(document) != {"value", "namespace", "key"}:
        return None
    namespace, key, value = document["namespace"], document["key"], document["value"]
    if not (isinstance(namespace, list) and isinstance(key, str) and isinstance(value, dict)):
        return None
    return Envelope(tuple(namespace), key, value)


@dataclass(frozen=True, slots=True)
class KeyIds:
    """The ids of one (namespace, key): generation ``n`` is :meth:`id` (n)."""

    digest: str

    @classmethod
    def of(cls, scope: Scope, namespace: Sequence[str], key: str, secret: bytes) -> KeyIds:
        """The ids of ``key`` in ``namespace`` mapped to ``scope`` (two maps that send a
        namespace to two scopes, or two agents, give two memories), under ``secret``."""
        message = json.dumps([*scope, list(namespace), key], ensure_ascii=False).encode("utf-8")
        digest = hmac.new(check_secret(secret), message, hashlib.sha256).hexdigest()
        return cls(digest[:32])

    def id(self, generation: int) -> str:
        return f"{ID_PREFIX}{self.digest}-{generation}"


def check_secret(secret: object) -> bytes:
    """``secret`` if it is bytes of at least :data:`MIN_SECRET`; else a ``ValueError``."""
    if not isinstance(secret, bytes) or len(secret) < MIN_SECRET:
        raise ValueError(
            f"key_secret must be bytes of at least {MIN_SECRET} (memory ids are an HMAC "
            "under it: without a secret anyone could compute them); e.g. secrets.token_bytes(32)"
        )
    return secret
