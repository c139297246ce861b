"""The requests of the HTTP API, each with the decoder of its answer.

Everything here is shared by :class:`~governed_memory.client.Client` and
:class:`~governed_memory.client.AsyncClient`: a :class:`Call` describes one request and how
to read its answer, one factory per endpoint builds it, and :func:`decode` turns the answer
into the library's own value (through the values' ``from_dict``) or into the library's
exception (through :mod:`governed_memory.client._problems`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypedDict, TypeVar
from urllib.parse import quote

import httpx

from governed_memory.client._problems import error_from
from governed_memory.core.model import MemoryItem
from governed_memory.core.values import Kind, Provenance, Status, Trust, rfc3339
from governed_memory.errors import GovernedMemoryError
from governed_memory.results import (
    AuditEvent,
    EraseResult,
    ForgetResult,
    ItemPage,
    QuarantinePage,
    SearchResult,
    WriteResult,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request to the API and the decoder of its successful answer.

    :attr:`retryable` is true when sending the request twice cannot do anything twice:
    reads, ``safe`` calls such as a search, and mutating calls that carry an idempotency
    key. ``ok`` lists the statuses that ``decode`` reads instead of raising
    (``/health/ready`` answers 503 when not ready). ``memory_id`` and ``expected_version``
    rebuild a :class:`~governed_memory.VersionConflict` faithfully.
    """

    method: str
    path: str
    decode: Callable[[httpx.Response], T]
    json: Any = None
    params: Mapping[str, Any] | None = None
    idempotency_key: str | None = None
    safe: bool = False
    ok: frozenset[int] = field(default_factory=frozenset)
    memory_id: str | None = None
    expected_version: int | None = None

    @property
    def retryable(self) -> bool:
        return self.safe or self.method == "GET" or self.idempotency_key is not None

    @property
    def headers(self) -> dict[str, str]:
        if self.idempotency_key is None:
            return {}
        return {"Idempotency-Key": self.idempotency_key}


def new_idempotency_key() -> str:
    """A fresh key for one logical mutating call; every retry of the call reuses it."""
    return str(uuid.uuid4())


def decode(response: httpx.Response, call: Call[T]) -> T:
    """The value of a successful answer, or the library exception of a failed one."""
    if response.is_success or response.status_code in call.ok:
        try:
            return call.decode(response)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise GovernedMemoryError(
                f"{call.method} {call.path}: the answer is not a governed-memory response "
                f"(HTTP {response.status_code})"
            ) from None
    raise error_from(response, call)


def _path(template: str, *parts: str) -> str:
    return template.format(*(quote(part, safe="") for part in parts))


def _enum(value: Any) -> Any:
    return value.value if isinstance(value, Kind | Trust | Status) else value


def _present(body: Mapping[str, Any]) -> dict[str, Any]:
    """``None`` means absent (SPEC §13): such members are left out of a body."""
    return {name: value for name, value in body.items() if value is not None}


# -- memories ------------------------------------------------------------------------------


# Two classes rather than ``Required[...]``: with postponed annotations Python 3.11 cannot
# tell required keys at run time, and write_body checks them like keyword arguments.
class _RequiredFields(TypedDict):
    agent_id: str
    subject_id: str
    purpose: str
    kind: Kind | str
    content: str
    provenance: Provenance | Mapping[str, Any]


class WriteFields(_RequiredFields, total=False):
    """The fields of a write, as :meth:`Client.write` and :meth:`Client.create` take them.

    ``trust`` defaults to the service's ``untrusted`` (quarantined until promoted); give
    ``expires_at`` or ``ttl_seconds``, not both; ``None`` means absent.
    """

    trust: Trust | str | None
    confidence: float | None
    expires_at: datetime | str | None
    ttl_seconds: int | None
    supersedes_id: str | None


_REQUIRED = WriteFields.__required_keys__
_KNOWN = WriteFields.__required_keys__ | WriteFields.__optional_keys__


def write_body(fields: WriteFields, method: str) -> dict[str, Any]:
    """The JSON body of a write (without ``expected_version``).

    A missing or unknown field is a ``TypeError``, as for any keyword argument.
    """
    unknown, missing = sorted(set(fields) - _KNOWN), sorted(_REQUIRED - set(fields))
    if unknown:
        raise TypeError(f"{method}() got an unexpected keyword argument {unknown[0]!r}")
    if missing:
        names = ", ".join(repr(name) for name in missing)
        raise TypeError(f"{method}() missing required keyword arguments: {names}")
    provenance: Any = fields["provenance"]
    if isinstance(provenance, Provenance):
        provenance = provenance.as_dict()
    if isinstance(provenance, Mapping):
        provenance = _present(provenance)
    expires_at = fields.get("expires_at")
    return _present(
        {
            **fields,
            "kind": _enum(fields["kind"]),
            "provenance": provenance,
            "trust": _enum(fields.get("trust")),
            "expires_at": rfc3339(expires_at) if isinstance(expires_at, datetime) else expires_at,
        }
    )


def _written(response: httpx.Response) -> WriteResult:
    return WriteResult(MemoryItem.from_dict(response.json()), created=response.status_code == 201)


def _item(response: httpx.Response) -> MemoryItem:
    return MemoryItem.from_dict(response.json())


def put_call(
    memory_id: str, fields: WriteFields, expected_version: int, idempotency_key: str | None
) -> Call[WriteResult]:
    """``PUT /v1/memories/{id}``: create at version 0, or replace at the current version."""
    return Call(
        "PUT",
        _path("/v1/memories/{}", memory_id),
        _written,
        json=write_body(fields, "write") | {"expected_version": expected_version},
        idempotency_key=idempotency_key or new_idempotency_key(),
        memory_id=memory_id,
        expected_version=expected_version,
    )


def post_call(fields: WriteFields, idempotency_key: str | None) -> Call[WriteResult]:
    """``POST /v1/memories``: create a memory whose id the service generates."""
    return Call(
        "POST",
        "/v1/memories",
        _written,
        json=write_body(fields, "create"),
        idempotency_key=idempotency_key or new_idempotency_key(),
    )


def get_call(memory_id: str) -> Call[MemoryItem]:
    return Call("GET", _path("/v1/memories/{}", memory_id), _item, memory_id=memory_id)


def erase_call(memory_id: str, idempotency_key: str | None) -> Call[EraseResult]:
    """``DELETE /v1/memories/{id}``: erase one memory."""
    return Call(
        "DELETE",
        _path("/v1/memories/{}", memory_id),
        lambda response: EraseResult.from_dict(response.json()),
        idempotency_key=idempotency_key or new_idempotency_key(),
        memory_id=memory_id,
    )


def list_call(
    *,
    agent_id: str | None,
    purpose: str | None,
    subject_id: str | None,
    status: Status | str | None,
    kind: Kind | str | None,
    limit: int | None,
    cursor: str | None,
) -> Call[ItemPage]:
    """``GET /v1/memories``: one page of memories passing the filters given."""
    params = {
        "agent_id": agent_id,
        "purpose": purpose,
        "subject_id": subject_id,
        "status": _enum(status),
        "kind": _enum(kind),
        "limit": limit,
        "cursor": cursor,
    }
    return Call(
        "GET",
        "/v1/memories",
        lambda response: ItemPage.from_dict(response.json()),
        params=_present(params),
    )


def history_call(memory_id: str) -> Call[list[AuditEvent]]:
    def history(response: httpx.Response) -> list[AuditEvent]:
        entries = response.json()["events"]
        return [AuditEvent.from_history_dict(entry, memory_id) for entry in entries]

    return Call("GET", _path("/v1/memories/{}/history", memory_id), history, memory_id=memory_id)


# -- review --------------------------------------------------------------------------------


def review_call(
    action: str,
    memory_id: str,
    expected_version: int,
    reason: str | None,
    idempotency_key: str | None,
) -> Call[MemoryItem]:
    """``POST /v1/memories/{id}/promote`` or ``…/reject``."""
    return Call(
        "POST",
        _path("/v1/memories/{}/" + action, memory_id),
        _item,
        json=_present({"expected_version": expected_version, "reason": reason}),
        idempotency_key=idempotency_key or new_idempotency_key(),
        memory_id=memory_id,
        expected_version=expected_version,
    )


def quarantine_call(
    agent_id: str | None, purpose: str | None, limit: int | None, cursor: str | None
) -> Call[QuarantinePage]:
    return Call(
        "GET",
        "/v1/quarantine",
        lambda response: QuarantinePage.from_dict(response.json()),
        params=_present(
            {"agent_id": agent_id, "purpose": purpose, "limit": limit, "cursor": cursor}
        ),
    )


# -- retrieval, subjects, audit, health ----------------------------------------------------


def search_call(
    *,
    agent_id: str,
    purpose: str,
    query: str,
    subject_id: str | None,
    kinds: Sequence[Kind | str] | None,
    limit: int | None,
    token_budget: int | None,
) -> Call[SearchResult]:
    body = {
        "agent_id": agent_id,
        "purpose": purpose,
        "query": query,
        "subject_id": subject_id,
        "kinds": None if kinds is None else [_enum(kind) for kind in kinds],
        "limit": limit,
        "token_budget": token_budget,
    }
    # A search changes nothing, so it is safe to send again although it is a POST.
    return Call(
        "POST",
        "/v1/search",
        lambda response: SearchResult.from_dict(response.json()),
        json=_present(body),
        safe=True,
    )


def forget_call(subject_id: str, idempotency_key: str | None) -> Call[ForgetResult]:
    return Call(
        "POST",
        _path("/v1/subjects/{}/forget", subject_id),
        lambda response: ForgetResult.from_dict(response.json()),
        idempotency_key=idempotency_key or new_idempotency_key(),
    )


def events_call(after: int, limit: int) -> Call[list[AuditEvent]]:
    def feed(response: httpx.Response) -> list[AuditEvent]:
        return [AuditEvent.from_dict(entry) for entry in response.json()["events"]]

    return Call("GET", "/v1/events", feed, params={"after": after, "limit": limit})


def health_call(path: str) -> Call[bool]:
    return Call("GET", path, lambda response: response.status_code == 200, ok=frozenset({503}))


__all__ = [
    "Call",
    "WriteFields",
    "decode",
    "erase_call",
    "events_call",
    "forget_call",
    "get_call",
    "health_call",
    "history_call",
    "list_call",
    "new_idempotency_key",
    "post_call",
    "put_call",
    "quarantine_call",
    "review_call",
    "search_call",
    "write_body",
]
