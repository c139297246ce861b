"""What an export carries besides the log: the API keys and the idempotency records.

Moving a store (SQLite to PostgreSQL, one machine to another) with ``gmem export`` and
``gmem import`` keeps its credentials and its retry protection: an agent's key still
authenticates afterwards, and a request retried across the move is answered from its
first outcome instead of being applied twice. The export holds them as two more record
types, after the events:

* ``{"record": "api_key", ...}``: the key's id, tenant, principal, name, agents, scopes,
  trust cap, times, and the *hash* of its secret (never the secret, which no store has);
* ``{"record": "idempotency", ...}``: tenant, credential, key, the request's fingerprint,
  the first outcome (ids and versions, never content) and the log position it recorded.

``gmem export --without-credentials`` leaves both out. On import, an API key whose id the
target store has already is kept as the target has it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from governed_memory.core import values
from governed_memory.core.values import Scope, Trust
from governed_memory.errors import ValidationError
from governed_memory.ports import Store
from governed_memory.records import ApiKey, IdempotencyRecord

#: The record types this module reads and writes.
CARRIED = ("api_key", "idempotency")
#: Idempotency records read at once.
PAGE = 5_000
_KEY_ID = re.compile(r"[0-9a-f]{16}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def carried_records(store: Store) -> Iterator[dict[str, Any]]:
    """Every API key, then every idempotency record, as export records."""
    for key in store.api_keys():
        yield api_key_record(key)
    after: tuple[str, str, str] | None = None
    while True:
        page = store.idempotency_records(after, PAGE)
        for record in page:
            yield idempotency_export(record)
        if len(page) < PAGE:
            return
        after = (page[-1].tenant_id, page[-1].credential, page[-1].key)


def api_key_record(key: ApiKey) -> dict[str, Any]:
    """An API key as an export record (the hash of its secret, never a secret)."""
    return {
        "record": "api_key",
        "key_id": key.key_id,
        "tenant_id": key.tenant_id,
        "principal_id": key.principal_id,
        "name": key.name,
        "agents": None if key.agents is None else sorted(key.agents),
        "scopes": sorted(scope.value for scope in key.scopes),
        "max_trust": key.max_trust.value,
        "secret_hash": key.secret_hash,
        "created_at": key.created_at.isoformat(),
        "revoked_at": _instant(key.revoked_at),
        "expires_at": _instant(key.expires_at),
        "last_used_at": _instant(key.last_used_at),
    }


def api_key_from(data: Mapping[str, Any]) -> ApiKey:
    """The API key of an export record, every field checked; ``ValidationError`` if not."""
    agents = data["agents"]
    if agents is not None and not isinstance(agents, list):
        raise ValidationError.field("agents", "must be a list or null")
    return ApiKey(
        key_id=_matching(_KEY_ID, data["key_id"], "key_id"),
        tenant_id=values.tenant_id(data["tenant_id"]),
        principal_id=values.principal_id(data["principal_id"]),
        agents=None if agents is None else frozenset(values.agent_id(a) for a in agents),
        scopes=frozenset(values.enum_value(Scope, s, "scopes") for s in _list(data["scopes"])),
        max_trust=values.enum_value(Trust, data["max_trust"], "max_trust"),
        secret_hash=_matching(_HEX64, data["secret_hash"], "secret_hash"),
        created_at=values.utc(data["created_at"], "created_at"),
        name=None if data["name"] is None else values.text(data["name"], "name"),
        revoked_at=_instant_from(data["revoked_at"], "revoked_at"),
        expires_at=_instant_from(data["expires_at"], "expires_at"),
        last_used_at=_instant_from(data["last_used_at"], "last_used_at"),
    )


def idempotency_export(record: IdempotencyRecord) -> dict[str, Any]:
    """An idempotency record as an export record."""
    return {
        "record": "idempotency",
        "tenant_id": record.tenant_id,
        "credential": record.credential,
        "key": record.key,
        "fingerprint": record.fingerprint,
        "result": dict(record.result),
        "position": record.position,
    }


def idempotency_from(data: Mapping[str, Any]) -> IdempotencyRecord:
    """The idempotency record of an export record, checked; ``ValidationError`` if not."""
    result, position = data["result"], data["position"]
    if not isinstance(result, dict):
        raise ValidationError.field("result", "must be an object")
    if position is not None and (type(position) is not int or position < 1):
        raise ValidationError.field("position", "must be a positive integer or null")
    return IdempotencyRecord(
        tenant_id=values.tenant_id(data["tenant_id"]),
        credential=values.text(data["credential"], "credential", max_chars=200, min_chars=1),
        key=values.idempotency_key(data["key"]),
        fingerprint=_matching(_HEX64, data["fingerprint"], "fingerprint"),
        result=result,
        position=position,
    )


class CarriedLoader:
    """Stores the carried records of an import (after its events), ``chunk`` at a time."""

    def __init__(self, store: Store, chunk: int) -> None:
        self._store = store
        self._chunk = chunk
        self._records: list[IdempotencyRecord] = []

    def add(self, record: str, data: Mapping[str, Any]) -> None:
        """Store an API key at once (but not over one the store has); gather an
        idempotency record."""
        if record == "api_key":
            key = api_key_from(data)
            if self._store.api_key(key.key_id) is None:
                self._store.add_api_key(key)
            return
        self._records.append(idempotency_from(data))
        if len(self._records) >= self._chunk:
            self.flush()

    def flush(self) -> None:
        """Store the idempotency records gathered so far."""
        if self._records:
            self._store.import_idempotency(self._records)
            self._records = []


def _instant(instant: datetime | None) -> str | None:
    return None if instant is None else instant.isoformat()


def _instant_from(value: object, field: str) -> datetime | None:
    return None if value is None else values.utc(value, field)


def _list(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise ValidationError.field("scopes", "must be a list")
    return value


def _matching(pattern: re.Pattern[str], value: object, field: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ValidationError.field(field, "is malformed")
    return value


__all__ = [
    "CARRIED",
    "CarriedLoader",
    "api_key_from",
    "api_key_record",
    "carried_records",
    "idempotency_export",
    "idempotency_from",
]
