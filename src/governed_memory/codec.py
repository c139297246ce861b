"""Events and items ⇄ stored rows: the one place where the storage form is defined.

Every backend and the export format use these functions, so a log written by SQLite reads
back identically from PostgreSQL or from an export file. Instants are stored as integer
microseconds since the epoch; sealed blobs travel as base64 inside JSON payloads.

An event's *canonical* columns (:data:`EVENT_COLUMNS`, the payload as compact JSON with
the sealed content in base64) are what the hash chain digests and an export holds.
SQLite stores a ``memory.written`` event in a *compact* form (migration 12): the sealed
content as a raw blob, its content hash as 32 bytes, and a payload of the remaining values
without their keys, the subject id left to its column; :func:`canonical_payload` gives
back the canonical payload text byte for byte, and rows in either form read alike.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from functools import lru_cache
from json.encoder import encode_basestring_ascii
from operator import attrgetter
from typing import Any

from governed_memory.core.events import (
    EVENT_TYPES,
    RETENTION,
    SCHEMA_VERSION,
    Event,
    MemoryContentDestroyed,
    MemoryRejected,
    MemorySuperseded,
    MemoryWritten,
    StoredEvent,
    SubjectForgotten,
)
from governed_memory.core.model import ItemState
from governed_memory.core.values import (
    Kind,
    Provenance,
    Scope,
    Status,
    Trust,
    from_micros,
    to_micros,
)
from governed_memory.records import ApiKey, IdempotencyRecord


class CodecError(ValueError):
    """A stored row or an exported line does not decode to a valid event."""


#: Compact JSON with sorted keys, exactly ``json.dumps(value, separators=(",", ":"),
#: sort_keys=True)``: the stored text of payloads (the hash chain digests it) and
#: provenances. One encoder, not one per call as ``json.dumps`` makes with these options.
_compact_json = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
#: A JSON value at the start of a text, and where it ends (``json.JSONDecoder.raw_decode``).
_read_json = json.JSONDecoder().raw_decode
#: A string as that encoder writes it (``ensure_ascii``: the same C function).
_quoted: Callable[[str], str] = encode_basestring_ascii


def _b64(blob: bytes | None) -> str | None:
    return None if blob is None else base64.b64encode(blob).decode("ascii")


def _unb64(text: object) -> bytes | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise CodecError("a sealed blob must be base64 text")
    return base64.b64decode(text.encode("ascii"), validate=True)


@dataclass(frozen=True, slots=True)
class EventRow:
    """The columns of one row of the events table (position assigned by the store)."""

    event_id: str
    type: str
    tenant_id: str
    memory_id: str | None
    subject_id: str | None
    version: int | None
    occurred_at: int
    actor: str
    idempotency_key: str | None
    schema_version: int
    payload: str


#: The columns of the events table after ``position``, in :class:`EventRow` order: the one
#: list of them, which every backend's SQL and the export format are written from.
EVENT_COLUMNS = tuple(f.name for f in fields(EventRow))
#: An :class:`EventRow`'s values in :data:`EVENT_COLUMNS` order (a tuple, for the driver).
event_values: Callable[[EventRow], tuple[Any, ...]] = attrgetter(*EVENT_COLUMNS)


def payload_of(event: Event) -> dict[str, Any]:
    """The type-specific part of an event, JSON-ready."""
    if isinstance(event, MemoryWritten):
        return {
            "agent_id": event.agent_id,
            "subject_id": event.subject_id,
            "purpose": event.purpose,
            "kind": event.kind.value,
            "content": _b64(event.content),
            "content_hash": event.content_hash,
            "provenance": event.provenance.as_dict(),
            "trust": event.trust.value,
            "confidence": event.confidence,
            "expires_at": to_micros(event.expires_at),
            "supersedes_id": event.supersedes_id,
            "status": event.status.value,
            "tokens": event.tokens,
        }
    if isinstance(event, MemoryRejected):
        return {"reason": _b64(event.reason)}
    if isinstance(event, MemorySuperseded):
        return {"superseded_by": event.superseded_by}
    if isinstance(event, SubjectForgotten):
        return {"subject_id": event.subject_id}
    if isinstance(event, MemoryContentDestroyed):
        return {"cause": event.cause}
    return {}


def event_row(event: Event) -> EventRow:
    """An event as the columns every backend stores."""
    return EventRow(*event_columns(event))


def event_columns(event: Event) -> tuple[Any, ...]:
    """An event's stored columns in :data:`EVENT_COLUMNS` order (what :func:`event_row`
    holds, as the tuple the drivers and the hash chain take: every write makes one)."""
    return _columns(event, _compact_json(payload_of(event)))


def _columns(event: Event, payload: str) -> tuple[Any, ...]:
    subject = event.subject_id if isinstance(event, MemoryWritten | SubjectForgotten) else None
    return (
        event.event_id,
        event.type,
        event.tenant_id,
        event.memory_id,
        subject,
        event.version,
        to_micros(event.occurred_at),
        event.actor,
        event.idempotency_key,
        SCHEMA_VERSION,
        payload,
    )


def event_from_row(row: EventRow) -> Event:
    """The event a stored row holds; :class:`CodecError` if it is not a valid event."""
    return event_from_columns(event_values(row))


def event_from_columns(columns: tuple[Any, ...]) -> Event:
    """The event of a stored row's columns in :data:`EVENT_COLUMNS` order (as a driver
    reads them: a rebuild decodes every event of the log, without an :class:`EventRow`
    for each); :class:`CodecError` if they are not a valid event."""
    (
        event_id,
        event_type,
        tenant_id,
        memory_id,
        _subject_id,
        version,
        occurred_at,
        actor,
        idempotency_key,
        schema_version,
        text,
    ) = columns
    if schema_version != SCHEMA_VERSION:
        raise CodecError(f"unknown event schema version {schema_version}")
    try:
        payload = json.loads(text)
        cls = EVENT_TYPES.get(event_type)
        if cls is MemoryWritten:  # most of a log: built in one call, without the dict below
            if memory_id is None or version is None:
                raise CodecError(f"{event_type} without memory id or version")
            key = idempotency_key
            return _written_from(
                payload, event_id, tenant_id, memory_id, version, occurred_at, actor, key
            )
        common: dict[str, Any] = {
            "event_id": event_id,
            "tenant_id": tenant_id,
            "occurred_at": from_micros(occurred_at),
            "actor": actor,
            "idempotency_key": idempotency_key,
        }
        if cls is None:
            raise CodecError(f"unknown event type {event_type!r}")
        if cls is SubjectForgotten:
            return SubjectForgotten(
                memory_id=None, version=None, subject_id=payload["subject_id"], **common
            )
        if memory_id is None or version is None:
            raise CodecError(f"{event_type} without memory id or version")
        common |= {"memory_id": memory_id, "version": version}
        if cls is MemoryRejected:
            return MemoryRejected(reason=_unb64(payload.get("reason")), **common)
        if cls is MemorySuperseded:
            return MemorySuperseded(superseded_by=payload["superseded_by"], **common)
        if cls is MemoryContentDestroyed and payload["cause"] != RETENTION:
            raise CodecError(f"unknown cause of {event_type}")
        return cls(**common)  # the rest carry nothing but the header (and a known cause)
    except CodecError:
        raise
    except (KeyError, TypeError, ValueError) as error:
        raise CodecError(f"malformed {event_type} event: {type(error).__name__}") from None


@lru_cache(maxsize=4096, typed=True)  # typed: 1.0 and True (a malformed row) stay apart
def _shared(value: str) -> str:
    """A string that many events of a log repeat (tenant, subject, actor, agent, purpose):
    the same object for the same text, of the last few thousand decoded. A rebuild's fold
    keeps one state per item, and each state would otherwise hold copies of its own, read
    from its row (about 0.3 KiB an item of the rebuild's peak). Not ``sys.intern``: as
    decoded events come and go, the interpreter's table of every interned string (tens
    of thousands of names) grows by about 2 MiB at once."""
    return value


@lru_cache(maxsize=1024, typed=True)
def _provenance(**fields_: Any) -> Provenance:
    """A provenance of a decoded event: the same object for the same fields (a log's
    items mostly share a few), one less for each item a rebuild holds. Raises
    ``TypeError`` for an unknown field or an unhashable value."""
    return Provenance(**fields_)


# The members of each enum by value: a dict lookup (a KeyError for an unknown value)
# costs a tenth of calling the enum, and a rebuild decodes every event of the log.
_KINDS = {member.value: member for member in Kind}
_TRUSTS = {member.value: member for member in Trust}
_STATUSES = {member.value: member for member in Status}


def _written_from(
    payload: Mapping[str, Any],
    event_id: str,
    tenant_id: str,
    memory_id: str,
    version: int,
    occurred_at: int,
    actor: str,
    key: str | None,
) -> MemoryWritten:
    """A ``memory.written`` event from its payload and the columns every event has."""
    content = _unb64(payload["content"])
    if content is None:
        raise CodecError("memory.written without content")
    return MemoryWritten(
        event_id=event_id,
        tenant_id=_shared(tenant_id),
        memory_id=memory_id,
        version=version,
        occurred_at=from_micros(occurred_at),
        actor=_shared(actor),
        idempotency_key=key,
        agent_id=_shared(payload["agent_id"]),
        subject_id=_shared(payload["subject_id"]),
        purpose=_shared(payload["purpose"]),
        kind=_KINDS[payload["kind"]],
        content=content,
        content_hash=payload["content_hash"],
        provenance=_provenance(**payload["provenance"]),
        trust=_TRUSTS[payload["trust"]],
        confidence=float(payload["confidence"]),
        expires_at=from_micros(payload["expires_at"]),
        supersedes_id=payload["supersedes_id"],
        status=_STATUSES[payload["status"]],
        tokens=int(payload["tokens"]),
    )


#: The values a compact ``memory.written`` payload holds, in order: every key of the
#: canonical payload but the three stored apart (``content``, ``content_hash`` and
#: ``subject_id``), in the canonical payload's (sorted) order.
_COMPACT_KEYS = (
    "agent_id",
    "confidence",
    "expires_at",
    "kind",
    "provenance",
    "purpose",
    "status",
    "supersedes_id",
    "tokens",
    "trust",
)
#: What a content hash is stored as 32 bytes when it is (the hex of a SHA-256, lowercase);
#: any other text is stored as written.
_HEX_HASH = re.compile(r"[0-9a-f]{64}")
#: The columns a stored row has after :data:`EVENT_COLUMNS`: in a compact row the sealed
#: content and its hash, ``NULL`` in a row of the canonical form.
SPLIT_COLUMNS = ("content", "content_hash")
_SPLIT = len(EVENT_COLUMNS)


def stored_columns(event: Event) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """An event's canonical columns (:func:`event_columns`, what its digest covers) and
    the columns a compact log stores (:data:`EVENT_COLUMNS` then :data:`SPLIT_COLUMNS`)."""
    if not isinstance(event, MemoryWritten):
        columns = event_columns(event)
        return columns, (*columns, None, None)
    payload = payload_of(event)
    columns = _columns(event, _compact_json(payload))
    values = [payload[key] for key in _COMPACT_KEYS]
    content_hash = event.content_hash
    stored_hash = bytes.fromhex(content_hash) if _HEX_HASH.fullmatch(content_hash) else content_hash
    stored = (*columns[:-1], _compact_json(values), event.content, stored_hash)
    return columns, stored


def canonical_payload(
    payload: str, subject_id: str | None, content: bytes | None, content_hash: object
) -> str:
    """The canonical payload text of a stored row (its payload, subject and split columns)."""
    if content is None:
        return payload  # stored in the canonical form
    fields_ = dict(zip(_COMPACT_KEYS, _compact_values(payload), strict=True))
    fields_["content"] = _b64(bytes(content))
    fields_["content_hash"] = _hash_text(content_hash)
    fields_["subject_id"] = subject_id
    return _compact_json(fields_)


def canonical_columns(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """The canonical columns of a stored row of :data:`EVENT_COLUMNS` and optionally
    :data:`SPLIT_COLUMNS` (``NULL`` or absent in a row of the canonical form)."""
    columns = row[:_SPLIT]
    content, content_hash = row[_SPLIT : _SPLIT + 2] or (None, None)
    if content is None:
        return columns
    payload = canonical_payload(columns[-1], columns[4], content, content_hash)
    return (*columns[:-1], payload)


def _hash_text(stored: object) -> str:
    if isinstance(stored, bytes | bytearray | memoryview):
        return bytes(stored).hex()
    if isinstance(stored, str):
        return stored
    raise CodecError("a stored content hash must be bytes or text")


def _written_from_compact(
    row: tuple[Any, ...], content: bytes, content_hash: object
) -> MemoryWritten:
    """A ``memory.written`` event from a compact row of ``position``, :data:`EVENT_COLUMNS`
    and :data:`SPLIT_COLUMNS` (no base64 or keyed JSON to parse; the row's columns taken
    as they are, without an :class:`EventRow` made of them, once an event a rebuild). The
    row is unpacked in :data:`EVENT_COLUMNS` order (``tests/test_wire_forms.py`` decodes
    every kind of event written this way)."""
    (
        _,
        event_id,
        event_type,
        tenant_id,
        memory_id,
        subject_id,
        version,
        occurred_at,
        actor,
        idempotency_key,
        schema_version,
        payload,
    ) = row[: 1 + _SPLIT]
    if event_type != MemoryWritten.type or schema_version != SCHEMA_VERSION:
        raise CodecError(f"a compact row of a {event_type} event")
    if memory_id is None or version is None or subject_id is None:
        raise CodecError(f"{event_type} without memory id, version or subject")
    (
        agent_id,
        confidence,
        expires_at,
        kind,
        provenance,
        purpose,
        status,
        supersedes_id,
        tokens,
        trust,
    ) = _compact_values(payload)
    return MemoryWritten(
        event_id=event_id,
        tenant_id=_shared(tenant_id),
        memory_id=memory_id,
        version=version,
        occurred_at=from_micros(occurred_at),
        actor=_shared(actor),
        idempotency_key=idempotency_key,
        agent_id=_shared(agent_id),
        subject_id=_shared(subject_id),
        purpose=_shared(purpose),
        kind=_KINDS[kind],
        content=bytes(content),
        content_hash=_hash_text(content_hash),
        provenance=_provenance(**provenance),
        trust=_TRUSTS[trust],
        confidence=float(confidence),
        expires_at=from_micros(expires_at),
        supersedes_id=supersedes_id,
        status=_STATUSES[status],
        tokens=int(tokens),
    )


def _compact_values(payload: str) -> list[Any]:
    """The values of a compact payload, as the compact encoder wrote them: one JSON list
    and nothing around it (no whitespace either). ``raw_decode`` reads the text without
    ``json.loads``' layers (its two whitespace matches and its checks for bytes), half its
    time; a rebuild decodes a payload an event. Raises ``ValueError`` (bad JSON) or
    ``TypeError`` (not text), which the decoding of a row reports as malformed."""
    values, end = _read_json(payload)
    if end != len(payload):
        raise CodecError("a compact payload must hold one JSON value and nothing more")
    if not isinstance(values, list) or len(values) != len(_COMPACT_KEYS):
        raise CodecError("a compact payload must be a list of its values")
    return values


def stored_event_from_row(row: tuple[Any, ...]) -> StoredEvent:
    """A stored event from a row of ``position``, :data:`EVENT_COLUMNS` and optionally
    :data:`SPLIT_COLUMNS` (``NULL`` or absent in a row of the canonical form)."""
    content, content_hash = row[1 + _SPLIT : 3 + _SPLIT] or (None, None)
    if content is None:  # a row of the canonical form: decoded from the driver's columns
        return StoredEvent(row[0], event_from_columns(row[1 : 1 + _SPLIT]))
    try:
        return StoredEvent(row[0], _written_from_compact(row, content, content_hash))
    except CodecError:
        raise
    except (KeyError, TypeError, ValueError) as error:
        raise CodecError(f"malformed {row[2]} event: {type(error).__name__}") from None


def stored_to_json(stored: StoredEvent) -> dict[str, Any]:
    """One exported event (JSON Lines): every column, content still sealed."""
    row = event_row(stored.event)
    record: dict[str, Any] = {"position": stored.position}
    record.update(zip(EVENT_COLUMNS, event_values(row), strict=True))
    record["payload"] = json.loads(row.payload)
    return record


def stored_from_json(data: Mapping[str, Any]) -> StoredEvent:
    """The inverse of :func:`stored_to_json`."""
    try:
        columns = {name: data[name] for name in EVENT_COLUMNS}
        columns["payload"] = _compact_json(data["payload"])
        row = EventRow(**columns)
        position = data["position"]
    except (KeyError, TypeError) as error:
        raise CodecError(f"malformed exported event: {type(error).__name__}") from None
    if not isinstance(position, int) or position < 1:
        raise CodecError("an exported event needs a positive integer position")
    return StoredEvent(position, event_from_row(row))


ITEM_COLUMNS = (
    "tenant_id",
    "id",
    "agent_id",
    "subject_id",
    "purpose",
    "kind",
    "content",
    "content_version",
    "content_hash",
    "provenance",
    "trust",
    "confidence",
    "created_at",
    "updated_at",
    "expires_at",
    "version",
    "status",
    "supersedes_id",
    "superseded_by",
    "written_by",
    "tokens",
)


def _provenance_json(provenance: Provenance) -> str:
    """The stored text of a provenance, exactly ``_compact_json(provenance.as_dict())``,
    written out directly when its fields are strings (a rebuild makes every item's row)."""
    source, ref, version = provenance.source, provenance.ref, provenance.version
    if type(source) is str and type(ref) is str and (version is None or type(version) is str):
        last = "null" if version is None else _quoted(version)
        return f'{{"ref":{_quoted(ref)},"source":{_quoted(source)},"version":{last}}}'
    return _compact_json(provenance.as_dict())


def item_row(item: ItemState) -> tuple[Any, ...]:
    """An item as a row in :data:`ITEM_COLUMNS` order. Each enum member's value is read
    from ``_value_``, the attribute behind ``Enum.value``, whose Python-level property
    costs three times as much: a rebuild makes every item's row."""
    return (
        item.tenant_id,
        item.id,
        item.agent_id,
        item.subject_id,
        item.purpose,
        item.kind._value_,
        item.content,
        item.content_version,
        item.content_hash,
        _provenance_json(item.provenance),
        item.trust._value_,
        item.confidence,
        to_micros(item.created_at),
        to_micros(item.updated_at),
        to_micros(item.expires_at),
        item.version,
        item.status._value_,
        item.supersedes_id,
        item.superseded_by,
        item.written_by,
        item.tokens,
    )


def item_from_row(row: tuple[Any, ...]) -> ItemState:
    """The inverse of :func:`item_row`."""
    (
        tenant_id,
        memory_id,
        agent_id,
        subject_id,
        purpose,
        kind,
        content,
        content_version,
        content_hash,
        provenance,
        trust,
        confidence,
        created_at,
        updated_at,
        expires_at,
        version,
        status,
        supersedes_id,
        superseded_by,
        written_by,
        tokens,
    ) = row
    # Members by value (a dict lookup; the enum's own error for anything else): a search
    # decodes the row of each of its candidates.
    kind_member = _KINDS.get(kind)
    trust_member = _TRUSTS.get(trust)
    status_member = _STATUSES.get(status)
    return ItemState(
        tenant_id=tenant_id,
        id=memory_id,
        agent_id=agent_id,
        subject_id=subject_id,
        purpose=purpose,
        kind=Kind(kind) if kind_member is None else kind_member,
        content=None if content is None else bytes(content),
        content_version=content_version,
        content_hash=content_hash,
        provenance=Provenance(**json.loads(provenance)),
        trust=Trust(trust) if trust_member is None else trust_member,
        confidence=confidence,
        created_at=from_micros(created_at),
        updated_at=from_micros(updated_at),
        expires_at=from_micros(expires_at),
        version=version,
        status=Status(status) if status_member is None else status_member,
        supersedes_id=supersedes_id,
        superseded_by=superseded_by,
        written_by=written_by,
        tokens=tokens,
    )


API_KEY_COLUMNS = (
    "key_id",
    "tenant_id",
    "name",
    "agents",
    "scopes",
    "max_trust",
    "secret_hash",
    "created_at",
    "revoked_at",
    "principal_id",
    "expires_at",
    "last_used_at",
)


def _micros_or_none(instant: datetime | None) -> int | None:
    return None if instant is None else to_micros(instant)


def _instant_or_none(micros: int | None) -> datetime | None:
    return None if micros is None else from_micros(micros)


def api_key_row(key: ApiKey) -> tuple[Any, ...]:
    """An API key as a row in :data:`API_KEY_COLUMNS` order (agents ``NULL`` means ``*``)."""
    return (
        key.key_id,
        key.tenant_id,
        key.name,
        None if key.agents is None else json.dumps(sorted(key.agents)),
        json.dumps(sorted(scope.value for scope in key.scopes)),
        key.max_trust.value,
        key.secret_hash,
        to_micros(key.created_at),
        _micros_or_none(key.revoked_at),
        key.principal_id,
        _micros_or_none(key.expires_at),
        _micros_or_none(key.last_used_at),
    )


def api_key_from_row(row: tuple[Any, ...]) -> ApiKey:
    """The inverse of :func:`api_key_row`."""
    (
        key_id,
        tenant_id,
        name,
        agents,
        scopes,
        max_trust,
        secret_hash,
        created_at,
        revoked_at,
        principal_id,
        expires_at,
        last_used_at,
    ) = row
    return ApiKey(
        key_id=key_id,
        tenant_id=tenant_id,
        principal_id=principal_id,
        agents=None if agents is None else frozenset(json.loads(agents)),
        scopes=frozenset(Scope(scope) for scope in json.loads(scopes)),
        max_trust=Trust(max_trust),
        secret_hash=secret_hash,
        created_at=from_micros(created_at),
        name=name,
        revoked_at=_instant_or_none(revoked_at),
        expires_at=_instant_or_none(expires_at),
        last_used_at=_instant_or_none(last_used_at),
    )


def idempotency_result(record: IdempotencyRecord) -> str:
    """The stored form of an idempotency record's first outcome (JSON text)."""
    return json.dumps(dict(record.result), sort_keys=True)


def idempotency_from_row(
    tenant_id: str, credential: str, key: str, row: tuple[Any, ...]
) -> IdempotencyRecord:
    """An idempotency record from its ``fingerprint, result, position`` columns."""
    fingerprint, result, position = row
    return IdempotencyRecord(tenant_id, credential, key, fingerprint, json.loads(result), position)
