"""``Authorization: Bearer <api key>`` → :class:`Principal`; the tenant comes from the key.

The key's id finds its stored record; the secret is checked against the stored hash; a
revoked or expired key is refused. A request that tries to name a tenant itself — a
``tenant_id`` or ``tenant`` query parameter, an ``X-Tenant-Id`` header (body fields are
refused by the request schemas) — is refused with 422 right after authentication, so no
caller can believe it chose its tenant. Every authenticated request counts against its
key's rate limit, and the key's last use is recorded (coarsely: :class:`LastUsed`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from governed_memory.apikeys import split_token, verify
from governed_memory.core.model import Principal
from governed_memory.errors import AuthenticationError, ReadWouldWait, ValidationError
from governed_memory.http.access_log import KEY_ID_STATE
from governed_memory.http.limits import FixedWindowLimiter
from governed_memory.ports import ApiKeys, Clock, SystemClock

log = logging.getLogger("governed_memory.http")

#: How often one instance records one key's use, at most (seconds).
LAST_USED_INTERVAL = 60.0

TENANT_QUERY_PARAMETERS = frozenset({"tenant_id", "tenant", "tenantid"})
TENANT_HEADERS = frozenset({"x-tenant-id", "x-tenant", "tenant-id"})
_TENANT_HEADER_NAMES = frozenset(name.encode("latin-1") for name in TENANT_HEADERS)


def refuse_tenant_naming(request: Request) -> None:
    """Refuse a query parameter or header that names a tenant (SPEC §5)."""
    message = "the tenant comes from the API key; a request cannot name it"
    if request.scope.get("query_string"):
        for name in request.query_params:
            if name.lower() in TENANT_QUERY_PARAMETERS:
                raise ValidationError.field(name, message)
    for raw, _ in request.scope["headers"]:  # raw: cheaper than Starlette's header view
        if raw.lower() in _TENANT_HEADER_NAMES:
            raise ValidationError.field(raw.decode("latin-1"), message)


def bearer_token(request: Request) -> str:
    """The token of the ``Authorization: Bearer`` header, or 401."""
    header = request.headers.get("authorization")
    if header is None:
        raise AuthenticationError("send an API key as Authorization: Bearer <key>")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationError("the Authorization header must be Bearer <key>")
    return token.strip()


class LastUsed:
    """Records when each key was last used, at most once per ``interval`` per key.

    A write per request would turn every read into a write, so each instance writes a
    key's use only when it has not written it for ``interval`` seconds (60 by default),
    from a worker thread, never delaying the request. The stored time is therefore that
    of a use at most ``interval`` seconds before the key's latest use on that instance;
    with several instances, the latest of their records (the store keeps the later time).
    A write that fails is logged and tried again at the next use after ``interval``.
    """

    def __init__(
        self,
        api_keys: ApiKeys,
        interval: float = LAST_USED_INTERVAL,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api_keys = api_keys
        self._interval = interval
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._written: dict[str, float] = {}

    def due(self, key_id: str) -> bool:
        """Whether ``key_id``'s use is to be written now (and note that it is)."""
        now = self._monotonic()
        with self._lock:
            last = self._written.get(key_id)
            if last is not None and now - last < self._interval:
                return False
            self._written[key_id] = now
            return True

    def note(self, key_id: str, at: datetime) -> None:
        """Record the use of ``key_id`` at ``at`` in the background, if it is due."""
        if self.due(key_id):
            asyncio.get_running_loop().run_in_executor(None, self.write, key_id, at)

    def write(self, key_id: str, at: datetime) -> None:
        """Store the use; a failure is logged, never raised (the request has its answer)."""
        try:
            self._api_keys.touch_api_key(key_id, at)
        except Exception as error:  # noqa: BLE001 - a lost last-use time is not an outage
            log.warning(
                "could not record an API key's last use (%s)",
                type(error).__name__,
                extra={"key_id": key_id},
            )


class Authenticator:
    """Turns a request into the principal of its API key, counting its rate limit.

    The key's record is read on the event loop if the store can answer without waiting
    (SQLite: an indexed lookup of microseconds), and from the thread pool otherwise
    (PostgreSQL: a network round trip; SQLite busy) — the loop never sleeps on a read.
    Every request reads the record afresh, so a revoked key is refused from its next
    request on, on every instance; an expired key from the instant it expires.
    """

    def __init__(
        self,
        api_keys: ApiKeys,
        limiter: FixedWindowLimiter,
        clock: Clock | None = None,
        last_used: LastUsed | None = None,
    ) -> None:
        self.api_keys = api_keys
        self.limiter = limiter
        self.clock = clock or SystemClock()
        self.last_used = last_used or LastUsed(api_keys)

    async def __call__(self, request: Request) -> Principal:
        key_id, secret = split_token(bearer_token(request))
        try:
            record = self.api_keys.api_key(key_id, wait=False)
        except ReadWouldWait:
            record = await run_in_threadpool(self.api_keys.api_key, key_id)
        now = self.clock.now()
        principal = verify(record, secret, now)
        self.last_used.note(key_id, now)  # authenticated: used, even if refused below
        refuse_tenant_naming(request)
        state = request.scope.setdefault("state", {})
        state[KEY_ID_STATE] = key_id
        self.limiter.check(key_id, state)
        return principal


__all__ = [
    "LAST_USED_INTERVAL",
    "Authenticator",
    "LastUsed",
    "bearer_token",
    "refuse_tenant_naming",
]
