"""The console's server-side sessions: an API key exchanged once for a session cookie.

Signing in checks the key as the API's authenticator does (:func:`~governed_memory.apikeys.
verify`); the session then keeps the key's id and the hash of its secret, never the
secret. Every request reads the key's record again, so a revoked or expired key, or one
whose secret was replaced, ends its sessions at their next request, and the principal's
tenant, agents and scopes are always the key's as stored now.

The cookie carries a random session id; the store keeps only its SHA-256. A session ends
when it sits idle longer than the idle timeout, after :data:`MAX_LIFETIME` whatever its
use, or at sign-out. Each session has its own CSRF token, which every form of the console
carries and every post must return. Sessions live in this process: behind several
instances, route a reviewer to the same one (docs/console.md).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from governed_memory.core.model import Principal
from governed_memory.ports import ApiKeys, Clock
from governed_memory.records import ApiKey

#: A session ends this long after sign-in, however busy it is.
MAX_LIFETIME = timedelta(hours=12)
#: The most sessions one instance keeps; the least recently used go first beyond it.
MAX_SESSIONS = 10_000


@dataclass(frozen=True, slots=True)
class Session:
    """One signed-in reviewer: which key, its secret's hash, the CSRF token, the times."""

    key_id: str
    secret_hash: str
    csrf: str
    started: datetime
    last_seen: datetime


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("ascii", "replace")).hexdigest()


def same_token(given: str | None, expected: str) -> bool:
    """Whether a CSRF token sent back equals the expected one (in constant time)."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def live_principal(record: ApiKey | None, session: Session, now: datetime) -> Principal | None:
    """The principal of the session's key as stored now, or ``None`` if it no longer
    admits the session (unknown, secret replaced, revoked, expired)."""
    if record is None or not hmac.compare_digest(record.secret_hash, session.secret_hash):
        return None
    if record.revoked_at is not None or (record.expires_at is not None and record.expired(now)):
        return None
    return record.principal()


class Sessions:
    """The sessions of this process, by the digest of their ids."""

    def __init__(self, api_keys: ApiKeys, clock: Clock, idle_timeout: timedelta) -> None:
        self._api_keys = api_keys
        self._clock = clock
        self.idle_timeout = idle_timeout
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}

    def start(self, record: ApiKey) -> tuple[str, Session]:
        """A new session for a verified key: its id (for the cookie) and the session."""
        session_id = secrets.token_urlsafe(32)
        now = self._clock.now()
        session = Session(record.key_id, record.secret_hash, secrets.token_urlsafe(32), now, now)
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions, key=lambda k: self._sessions[k].last_seen)
                del self._sessions[oldest]
            self._sessions[_digest(session_id)] = session
        return session_id, session

    def resume(self, session_id: str | None) -> tuple[Session, Principal] | None:
        """The live session of a cookie and its key's principal, its idle time restarted;
        ``None`` (and the session ended) if it timed out or its key no longer admits it."""
        if not session_id:
            return None
        digest, now = _digest(session_id), self._clock.now()
        with self._lock:
            session = self._sessions.get(digest)
        if session is None:
            return None
        if now - session.last_seen > self.idle_timeout or now - session.started >= MAX_LIFETIME:
            self.end(session_id)
            return None
        principal = live_principal(self._api_keys.api_key(session.key_id), session, now)
        if principal is None:
            self.end(session_id)
            return None
        session = replace(session, last_seen=now)
        with self._lock:
            if digest in self._sessions:
                self._sessions[digest] = session
        return session, principal

    def end(self, session_id: str | None) -> None:
        """Forget a session (sign-out); an unknown id is nothing to do."""
        if session_id:
            with self._lock:
                self._sessions.pop(_digest(session_id), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)


__all__ = ["MAX_LIFETIME", "Session", "Sessions", "live_principal", "same_token"]
