"""API keys: created once, shown once, stored as a hash, bound to one tenant (SPEC §5).

A key reads ``gmem_<key id>_<secret>``. The key id (public, 16 hex characters) finds the
record; the 256-bit random secret is compared by its SHA-256 hash in constant time. A
slow password hash would add nothing here: the secret is random, not chosen by a person.

Every key belongs to a principal (a person or a service account): four eyes compare
principals, so one person's second key is still that person. A key may expire.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta

from governed_memory.core import values as v
from governed_memory.core.model import Principal
from governed_memory.core.values import Scope, Trust
from governed_memory.errors import AuthenticationError, ValidationError
from governed_memory.records import ApiKey, credential_of

_TOKEN = re.compile(r"gmem_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
_KEY_ID = re.compile(r"[0-9a-f]{16}")
_DURATION = re.compile(r"([1-9][0-9]{0,5})([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


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


def parse_duration(text: str, field: str = "expires_in") -> timedelta:
    """``90d``, ``12h``, ``30m`` or ``45s``: a positive whole number and one unit."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValidationError.field(field, "must be a whole number and a unit: 90d, 12h, 30m, 45s")
    return timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[match.group(2)])


def create_api_key(
    tenant_id: str,
    agents: frozenset[str] | None,
    scopes: frozenset[Scope],
    max_trust: Trust,
    now: datetime,
    name: str | None = None,
    *,
    principal: str | None = None,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """A new key record and the token to hand out once (it is not stored).

    ``principal`` names whose key it is (default: the key itself, ``key:<key id>``, so a
    library caller that names nobody gets a key that is its own principal).
    """
    v.tenant_id(tenant_id)
    if max_trust is Trust.VERIFIED:
        raise ValidationError.field("max_trust", "verified is reached only by promotion")
    if Scope.ADMIN in scopes:
        # admin grants nothing in v1: keys are administered by whoever can run gmem keys on
        # the store. Keys that already carry it still load, and it still grants nothing.
        raise ValidationError.field(
            "scopes", "admin grants nothing: keys are managed with gmem keys; leave it out"
        )
    if name is not None:
        name = v.text(name, "name", max_chars=200)
    if principal is not None:
        principal = v.principal_id(principal, "principal")
    if expires_at is not None:
        expires_at = v.utc(expires_at, "expires_at")
        if expires_at <= now:
            raise ValidationError.field("expires_at", "must be in the future")
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    record = ApiKey(
        key_id=key_id,
        tenant_id=tenant_id,
        principal_id=principal or credential_of(key_id),
        agents=agents,
        scopes=scopes,
        max_trust=max_trust,
        secret_hash=_hash(secret),
        created_at=now,
        name=name,
        expires_at=expires_at,
    )
    return record, f"gmem_{key_id}_{secret}"


def split_token(token: str) -> tuple[str, str]:
    """(key id, secret) of a well-formed token; :class:`AuthenticationError` otherwise."""
    match = _TOKEN.fullmatch(token)
    if match is None:
        raise AuthenticationError("the API key is malformed")
    return match.group(1), match.group(2)


def key_id_of(text: str) -> str | None:
    """The key id in ``text``, a key id or a whole token; ``None`` if it is neither.

    Operators paste whole tokens where a key id is asked for: the id is taken from it, and
    nothing of the secret is kept or shown.
    """
    text = text.strip()
    if _KEY_ID.fullmatch(text):
        return text
    match = _TOKEN.fullmatch(text)
    return None if match is None else match.group(1)


def verify(record: ApiKey | None, secret: str, now: datetime) -> Principal:
    """The principal of a live key whose secret matches; :class:`AuthenticationError` else."""
    if record is None or not hmac.compare_digest(record.secret_hash, _hash(secret)):
        raise AuthenticationError("the API key is unknown or does not match")
    if record.revoked_at is not None:
        raise AuthenticationError("the API key was revoked")
    if record.expires_at is not None and record.expired(now):
        raise AuthenticationError(f"the API key expired at {v.rfc3339(record.expires_at)}")
    return record.principal()
