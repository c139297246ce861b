"""``Authorization: Bearer <api key>`` → :class:`Principal`; the tenant comes from the key.

The key's id finds its stored record; the secret is checked against the stored hash; a
revoked key is refused. A request that tries to name a tenant itself — a ``tenant_id`` or
``tenant`` query parameter, an ``X-Tenant-Id`` header (body fields are refused by the
request schemas) — is refused with 422 right after authentication, so no caller can
believe it chose its tenant. Every authenticated request counts against its key's rate
limit.
"""

from __future__ import annotations

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from governed_memory.apikeys import split_token, verify
from governed_memory.core.model import Principal
from governed_memory.errors import AuthenticationError, ReadWouldWait, ValidationError
from governed_memory.http.access_log import KEY_ID_STATE
from governed_memory.http.limits import FixedWindowLimiter
from governed_memory.ports import ApiKeys

TENANT_QUERY_PARAMETERS = frozenset({"tenant_id", "tenant", "tenantid"})
TENANT_HEADERS = frozenset({"x-tenant-id", "x-tenant", "tenant-id"})


def refuse_tenant_naming(request: Request) -> None:
    """Refuse a query parameter or header that names a tenant (SPEC §5)."""
    message = "the tenant comes from the API key; a request cannot name it"
    for name in request.query_params:
        if name.lower() in TENANT_QUERY_PARAMETERS:
            raise ValidationError.field(name, message)
    for name in request.headers:
        if name.lower() in TENANT_HEADERS:
            raise ValidationError.field(name, message)


def bearer_token(request: Request) -> str:
    """The token of the ``Authorization: Bearer`` header, or 401."""
    header = request.headers.get("authorization")
    if header is None:
        raise AuthenticationError("send an API key as Authorization: Bearer <key>")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationError("the Authorization header must be Bearer <key>")
    return token.strip()


class Authenticator:
    """Turns a request into the principal of its API key, counting its rate limit.

    The key's record is read on the event loop if the store can answer without waiting
    (SQLite: an indexed lookup of microseconds), and from the thread pool otherwise
    (PostgreSQL: a network round trip; SQLite busy) — the loop never sleeps on a read.
    Every request reads the record afresh, so a revoked key is refused from its next
    request on, on every instance.
    """

    def __init__(self, api_keys: ApiKeys, limiter: FixedWindowLimiter) -> None:
        self.api_keys = api_keys
        self.limiter = limiter

    async def __call__(self, request: Request) -> Principal:
        key_id, secret = split_token(bearer_token(request))
        try:
            record = self.api_keys.api_key(key_id, wait=False)
        except ReadWouldWait:
            record = await run_in_threadpool(self.api_keys.api_key, key_id)
        principal = verify(record, secret)
        refuse_tenant_naming(request)
        state = request.scope.setdefault("state", {})
        state[KEY_ID_STATE] = key_id
        self.limiter.check(key_id, state)
        return principal


__all__ = ["Authenticator", "bearer_token", "refuse_tenant_naming"]
