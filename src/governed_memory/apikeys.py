"""API keys: created once, shown once, stored as a hash, bound to one tenant (SPEC §5).

A key reads ``gmem_<key id>_<secret>``. The key id (public, 16 hex characters) finds the
record; the 256-bit random secret is compared by its SHA-256 hash in constant time. A
slow password hash would add nothing here: the secret is random, not chosen by a person.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from datetime import datetime

from governed_memory.core import values as v
from governed_memory.core.model import Principal
from governed_memory.core.values import Scope, Trust
from governed_memory.errors import AuthenticationError, ValidationError
from governed_memory.records import ApiKey

_TOKEN = re.compile(r"gmem_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def parse_scopes(values: Iterable[str]) -> frozenset[Scope]:
    """Scopes by name; an unknown name is a validation error."""
    scopes = frozenset(v.enum_value(Scope, value.strip(), "scopes") for value in values)
    if not scopes:
        raise ValidationError.field("scopes", "name at least one scope")
    return scopes


def parse_agents(values: Iterable[str]) -> frozenset[str] | None:
    """Agent ids by name, or ``None`` for ``*`` (every agent of the tenant)."""
    names = [value.strip() for value in values if value.strip()]
    if names == ["*"]:
        return None
    if not names:
        raise ValidationError.field("agents", "name at least one agent, or *")
    return frozenset(v.agent_id(name, "agents") for name in names)


def create_api_key(
    tenant_id: str,
    agents: frozenset[str] | None,
    scopes: frozenset[Scope],
    max_trust: Trust,
    now: datetime,
    name: str | None = None,
) -> tuple[ApiKey, str]:
    """A new key record and the token to hand out once (it is not stored)."""
    v.tenant_id(tenant_id)
    if max_trust is Trust.VERIFIED:
        raise ValidationError.field("max_trust", "verified is reached only by promotion")
    if name is not None:
        name = v.text(name, "name", max_chars=200)
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    record = ApiKey(key_id, tenant_id, agents, scopes, max_trust, _hash(secret), now, name)
    return record, f"gmem_{key_id}_{secret}"


def split_token(token: str) -> tuple[str, str]:
    """(key id, secret) of a well-formed token; :class:`AuthenticationError` otherwise."""
    match = _TOKEN.fullmatch(token)
    if match is None:
        raise AuthenticationError("the API key is malformed")
    return match.group(1), match.group(2)


def verify(record: ApiKey | None, secret: str) -> Principal:
    """The principal of a live key whose secret matches; :class:`AuthenticationError` else."""
    if record is None or not hmac.compare_digest(record.secret_hash, _hash(secret)):
        raise AuthenticationError("the API key is unknown or does not match")
    if record.revoked_at is not None:
        raise AuthenticationError("the API key was revoked")
    return record.principal()
