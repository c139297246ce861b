"""What travels between the client and the HTTP API: requests out, values and errors back.

Everything here is shared by :class:`~governed_memory.client.Client` and
:class:`~governed_memory.client.AsyncClient`: a :class:`Call` describes one request and how
to read its answer; the decoders turn JSON into the library's own value types; and
:func:`error_from` turns an ``application/problem+json`` answer back into the library's
exception, chosen by the problem's ``type`` (never by its text), so code written against
:class:`~governed_memory.MemoryService` handles the same errors over HTTP.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from governed_memory.core.model import MemoryItem
from governed_memory.core.values import Kind, Provenance, Status, Trust, rfc3339
from governed_memory.errors import (
    AuthenticationError,
    Conflict,
    FieldError,
    GovernedMemoryError,
    IdempotencyKeyReused,
    InvalidTransition,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    SelfPromotion,
    StoreUnavailable,
    ValidationError,
    VersionConflict,
)
from governed_memory.results import (
    AuditEvent,
    ForgetResult,
    QuarantinePage,
    SearchHit,
    SearchResult,
    WriteResult,
)

T = TypeVar("T")

TYPE_PREFIX = "urn:gmem:problem:"

# -- calls ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request to the API and the decoder of its successful answer.

    :attr:`retryable` is true when sending the request twice cannot do anything twice:
    reads, ``safe`` calls such as a search, and mutating calls that carry an idempotency
    key. ``ok`` lists the statuses
    that ``decode`` reads instead of raising (``/health/ready`` answers 503 when not ready).
    ``memory_id`` and ``expected_version`` rebuild a :class:`VersionConflict` faithfully.
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


def _path(template: str, *parts: str) -> str:
    return template.format(*(quote(part, safe="") for part in parts))


def _enum(value: Any) -> Any:
    return value.value if isinstance(value, Kind | Trust | Status) else value


def write_body(
    *,
    agent_id: str,
    subject_id: str,
    purpose: str,
    kind: Kind | str,
    content: str,
    provenance: Provenance | Mapping[str, Any],
    trust: Trust | str | None,
    confidence: float | None,
    expires_at: datetime | str | None,
    ttl_seconds: int | None,
    supersedes_id: str | None,
    expected_version: int,
) -> dict[str, Any]:
    """The JSON body of a write; ``None`` means absent (SPEC §13)."""
    body: dict[str, Any] = {
        "agent_id": agent_id,
        "subject_id": subject_id,
        "purpose": purpose,
        "kind": _enum(kind),
        "content": content,
        "provenance": provenance.as_dict() if isinstance(provenance, Provenance) else provenance,
        "trust": _enum(trust),
        "confidence": confidence,
        "expires_at": rfc3339(expires_at) if isinstance(expires_at, datetime) else expires_at,
        "ttl_seconds": ttl_seconds,
        "supersedes_id": supersedes_id,
        "expected_version": expected_version,
    }
    if isinstance(body["provenance"], Mapping):
        body["provenance"] = {k: v for k, v in body["provenance"].items() if v is not None}
    return {name: value for name, value in body.items() if value is not None}


def put_call(
    memory_id: str, body: dict[str, Any], idempotency_key: str | None
) -> Call[WriteResult]:
    return Call(
        "PUT",
        _path("/v1/memories/{}", memory_id),
        decode_write,
        json=body,
        idempotency_key=idempotency_key or new_idempotency_key(),
        memory_id=memory_id,
        expected_version=body.get("expected_version"),
    )


def post_call(body: dict[str, Any], idempotency_key: str | None) -> Call[WriteResult]:
    body = {name: value for name, value in body.items() if name != "expected_version"}
    return Call(
        "POST",
        "/v1/memories",
        decode_write,
        json=body,
        idempotency_key=idempotency_key or new_idempotency_key(),
    )


def get_call(memory_id: str) -> Call[MemoryItem]:
    return Call("GET", _path("/v1/memories/{}", memory_id), decode_item, memory_id=memory_id)


def history_call(memory_id: str) -> Call[list[AuditEvent]]:
    def decode(response: httpx.Response) -> list[AuditEvent]:
        return [audit_event(entry, memory_id) for entry in _json(response)["events"]]

    return Call("GET", _path("/v1/memories/{}/history", memory_id), decode, memory_id=memory_id)


def review_call(
    action: str,
    memory_id: str,
    expected_version: int,
    reason: str | None,
    idempotency_key: str | None,
) -> Call[MemoryItem]:
    body: dict[str, Any] = {"expected_version": expected_version}
    if reason is not None:
        body["reason"] = reason
    return Call(
        "POST",
        _path("/v1/memories/{}/" + action, memory_id),
        decode_item,
        json=body,
        idempotency_key=idempotency_key or new_idempotency_key(),
        memory_id=memory_id,
        expected_version=expected_version,
    )


def quarantine_call(
    agent_id: str | None, purpose: str | None, limit: int | None, cursor: str | None
) -> Call[QuarantinePage]:
    params = {"agent_id": agent_id, "purpose": purpose, "limit": limit, "cursor": cursor}
    return Call(
        "GET",
        "/v1/quarantine",
        decode_quarantine,
        params={k: v for k, v in params.items() if v is not None},
    )


def search_call(body: Mapping[str, Any]) -> Call[SearchResult]:
    # A search changes nothing, so it is safe to send again although it is a POST.
    return Call("POST", "/v1/search", decode_search, json=dict(body), safe=True)


def search_body(
    *,
    agent_id: str,
    purpose: str,
    query: str,
    subject_id: str | None,
    kinds: list[Kind | str] | tuple[Kind | str, ...] | None,
    limit: int | None,
    token_budget: int | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "agent_id": agent_id,
        "purpose": purpose,
        "query": query,
        "subject_id": subject_id,
        "kinds": None if kinds is None else [_enum(kind) for kind in kinds],
        "limit": limit,
        "token_budget": token_budget,
    }
    return {name: value for name, value in body.items() if value is not None}


def forget_call(subject_id: str, idempotency_key: str | None) -> Call[ForgetResult]:
    return Call(
        "POST",
        _path("/v1/subjects/{}/forget", subject_id),
        decode_forget,
        idempotency_key=idempotency_key or new_idempotency_key(),
    )


def events_call(after: int, limit: int) -> Call[list[AuditEvent]]:
    def decode(response: httpx.Response) -> list[AuditEvent]:
        return [audit_event(entry) for entry in _json(response)["events"]]

    return Call("GET", "/v1/events", decode, params={"after": after, "limit": limit})


def health_call(path: str) -> Call[bool]:
    return Call("GET", path, lambda response: response.status_code == 200, ok=frozenset({503}))


# -- decoding -------------------------------------------------------------------------------


def _json(response: httpx.Response) -> Any:
    return response.json()


def _instant(value: Any) -> datetime:
    return datetime.fromisoformat(str(value))


def item(data: Mapping[str, Any]) -> MemoryItem:
    """A :class:`MemoryItem` from its JSON form (extra members such as a score are ignored)."""
    provenance = data["provenance"]
    return MemoryItem(
        id=str(data["id"]),
        tenant_id=str(data["tenant_id"]),
        agent_id=str(data["agent_id"]),
        subject_id=str(data["subject_id"]),
        purpose=str(data["purpose"]),
        kind=Kind(data["kind"]),
        content=data["content"],
        content_hash=str(data["content_hash"]),
        provenance=Provenance(
            source=str(provenance["source"]),
            ref=str(provenance["ref"]),
            version=provenance.get("version"),
        ),
        trust=Trust(data["trust"]),
        confidence=float(data["confidence"]),
        created_at=_instant(data["created_at"]),
        updated_at=_instant(data["updated_at"]),
        expires_at=_instant(data["expires_at"]),
        version=int(data["version"]),
        status=Status(data["status"]),
        supersedes_id=data.get("supersedes_id"),
        superseded_by=data.get("superseded_by"),
    )


def decode_item(response: httpx.Response) -> MemoryItem:
    return item(_json(response))


def decode_write(response: httpx.Response) -> WriteResult:
    return WriteResult(item(_json(response)), created=response.status_code == 201)


def decode_search(response: httpx.Response) -> SearchResult:
    data = _json(response)
    hits = [
        SearchHit(
            item(hit),
            float(hit["score"]),
            {str(name): float(part) for name, part in hit["score_parts"].items()},
            int(hit["tokens"]),
        )
        for hit in data["items"]
    ]
    return SearchResult(
        hits, int(data["used_tokens"]), int(data["skipped"]), str(data["tokenizer"])
    )


def decode_quarantine(response: httpx.Response) -> QuarantinePage:
    data = _json(response)
    return QuarantinePage([item(entry) for entry in data["items"]], data.get("next_cursor"))


def decode_forget(response: httpx.Response) -> ForgetResult:
    data = _json(response)
    position = data.get("position")
    return ForgetResult(
        str(data["subject_id"]), int(data["affected"]), None if position is None else int(position)
    )


def audit_event(data: Mapping[str, Any], memory_id: str | None = None) -> AuditEvent:
    """An :class:`AuditEvent` from the feed, or from a history entry.

    History entries carry ``position, type, version, occurred_at, actor`` only (SPEC §8):
    their ``memory_id`` is the item asked about and their ``event_id`` is empty.
    """
    version = data.get("version")
    return AuditEvent(
        position=int(data["position"]),
        event_id=str(data.get("event_id") or ""),
        type=str(data["type"]),
        memory_id=data.get("memory_id", memory_id),
        version=None if version is None else int(version),
        occurred_at=_instant(data["occurred_at"]),
        actor=str(data["actor"]),
        subject_id=data.get("subject_id"),
    )


# -- problems -------------------------------------------------------------------------------

Factory = Callable[[str, Mapping[str, Any], httpx.Response, Call[Any]], GovernedMemoryError]


def _simple(cls: type[GovernedMemoryError]) -> Factory:
    return lambda detail, problem, response, call: cls(detail)


def _validation(
    detail: str, problem: Mapping[str, Any], response: httpx.Response, call: Call[Any]
) -> GovernedMemoryError:
    errors = [
        FieldError(str(entry.get("field", "")), str(entry.get("message", "is invalid")))
        for entry in problem.get("errors") or ()
        if isinstance(entry, Mapping)
    ]
    return ValidationError(detail, errors)


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _version_conflict(
    detail: str, problem: Mapping[str, Any], response: httpx.Response, call: Call[Any]
) -> GovernedMemoryError:
    expected = _int(problem.get("expected_version"), call.expected_version or 0)
    current = _int(problem.get("current_version"), -1)
    error = VersionConflict(call.memory_id or "", expected, current)
    error.detail = detail
    error.args = (detail,)
    return error


def _invalid_transition(
    detail: str, problem: Mapping[str, Any], response: httpx.Response, call: Call[Any]
) -> GovernedMemoryError:
    current = problem.get("current_version")
    return InvalidTransition(detail, None if current is None else _int(current, 0))


def _rate_limited(
    detail: str, problem: Mapping[str, Any], response: httpx.Response, call: Call[Any]
) -> GovernedMemoryError:
    retry_after = problem.get("retry_after", response.headers.get("Retry-After"))
    return RateLimited(detail, max(0, _int(retry_after, 1)))


#: The problem types of the API (``urn:gmem:problem:<slug>``) → the library's exceptions.
BY_TYPE: Mapping[str, Factory] = {
    "validation": _validation,
    "malformed-request": _validation,
    "unauthenticated": _simple(AuthenticationError),
    "forbidden": _simple(PermissionDenied),
    "self-review": _simple(SelfPromotion),
    "not-found": _simple(NotFound),
    "conflict": _simple(Conflict),
    "version-conflict": _version_conflict,
    "invalid-transition": _invalid_transition,
    "idempotency-key-reused": _simple(IdempotencyKeyReused),
    "payload-too-large": _simple(PayloadTooLarge),
    "rate-limited": _rate_limited,
    "unavailable": _simple(StoreUnavailable),
    "internal": _simple(GovernedMemoryError),
}

#: When an answer is not one of ours (a proxy's page, an unknown type): by status.
BY_STATUS: Mapping[int, Factory] = {
    400: _validation,
    401: _simple(AuthenticationError),
    403: _simple(PermissionDenied),
    404: _simple(NotFound),
    409: _simple(Conflict),
    413: _simple(PayloadTooLarge),
    422: _validation,
    429: _rate_limited,
    502: _simple(StoreUnavailable),
    503: _simple(StoreUnavailable),
    504: _simple(StoreUnavailable),
}


def _problem(response: httpx.Response) -> Mapping[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, Mapping) else {}


def error_from(response: httpx.Response, call: Call[Any]) -> GovernedMemoryError:
    """The library exception an error answer stands for, chosen by its problem ``type``."""
    problem = _problem(response)
    kind = problem.get("type")
    slug = kind.removeprefix(TYPE_PREFIX) if isinstance(kind, str) else None
    factory = (
        BY_TYPE.get(slug or "") if isinstance(kind, str) and kind.startswith(TYPE_PREFIX) else None
    ) or BY_STATUS.get(response.status_code, _simple(GovernedMemoryError))
    detail = problem.get("detail") or problem.get("title")
    if not isinstance(detail, str) or not detail:
        detail = f"{call.method} {call.path} answered HTTP {response.status_code}"
    return factory(detail, problem, response, call)


def decode(response: httpx.Response, call: Call[T]) -> T:
    """The value of a successful answer, or the library exception of a failed one."""
    if response.is_success or response.status_code in call.ok:
        try:
            return call.decode(response)
        except (KeyError, TypeError, ValueError):
            raise GovernedMemoryError(
                f"{call.method} {call.path}: the answer is not a governed-memory response "
                f"(HTTP {response.status_code})"
            ) from None
    raise error_from(response, call)


__all__ = [
    "BY_STATUS",
    "BY_TYPE",
    "Call",
    "audit_event",
    "decode",
    "error_from",
    "item",
    "new_idempotency_key",
]
