"""The console's server-side sessions: an API key exchanged once for a session cookie.

Signing in checks the key as the API's authenticator does (:func:`~governed_memory.apikeys.
verify`). The cookie carries a random session id; the store keeps only its SHA-256, the
key's id, a hash of the key's stored secret hash (never the secret) and two times, in its
``console_sessions`` table (:class:`~governed_memory.ports.ConsoleSessions`): every worker
of ``gmem serve --workers N`` and every instance on the same database share them. Every
request reads the key's record again, so a revoked or expired key, or one whose secret was
replaced, ends its sessions at their next request, and the principal's tenant, agents and
scopes are always the key's as stored now.

A session ends when it sits idle longer than the idle timeout, after :data:`MAX_LIFETIME`
whatever its use, or at sign-out (its row deleted). Its last use is written only when it
moved by more than :data:`TOUCH_FRACTION` of the idle timeout, not on every page view.
Each session's CSRF token, which every form carries and every post must return, is
derived from the session id (a hash of it under its own label): nothing to store, and
useless without the cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from governed_memory.core.model import Principal
from governed_memory.ports import Clock, Credentials
from governed_memory.records import ApiKey, ConsoleSession

#: A session ends this long after sign-in, however busy it is.
MAX_LIFETIME = timedelta(hours=12)
#: The last use is written when it moved by more than this share of the idle timeout (so a
#: session may end up to this share early; never late).
TOUCH_FRACTION = 0.05


@dataclass(frozen=True, slots=True)
class Session:
    """One signed-in reviewer: which key, the CSRF token, the times."""

    key_id: str
    csrf: str
    started: datetime
    last_seen: datetime


def _hash(label: bytes, value: str) -> str:
    return hashlib.sha256(label + value.encode("ascii", "replace")).hexdigest()


def digest_of(session_id: str) -> str:
    """What the store keeps of a session id: its SHA-256."""
    return _hash(b"", session_id)


def _csrf_of(session_id: str) -> str:
    return _hash(b"gmem console csrf\x00", session_id)


def _key_check(secret_hash: str) -> str:
    return _hash(b"gmem console key\x00", secret_hash)


def same_token(given: str | None, expected: str) -> bool:
    """Whether a CSRF token sent back equals the expected one (in constant time)."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def live_principal(
    record: ApiKey | None, session: ConsoleSession, now: datetime
) -> Principal | None:
    """The principal of the session's key as stored now, or ``None`` if it no longer
    admits the session (unknown, secret replaced, revoked, expired)."""
    if record is None or not same_token(_key_check(record.secret_hash), session.key_check):
        return None
    if record.revoked_at is not None or (record.expires_at is not None and record.expired(now)):
        return None
    return record.principal()


class Sessions:
    """The console's sessions, kept in the store."""

    def __init__(self, store: Credentials, clock: Clock, idle_timeout: timedelta) -> None:
        self._store = store
        self._clock = clock
        self.idle_timeout = idle_timeout

    def start(self, record: ApiKey) -> tuple[str, Session]:
        """A new session for a verified key: its id (for the cookie) and the session. The
        sessions idle past the timeout are deleted first."""
        session_id = secrets.token_urlsafe(32)
        now = self._clock.now()
        self._store.end_idle_console_sessions(now - self.idle_timeout)
        stored = ConsoleSession(
            digest_of(session_id), record.key_id, _key_check(record.secret_hash), now, now
        )
        self._store.add_console_session(stored)
        return session_id, Session(record.key_id, _csrf_of(session_id), now, now)

    def resume(self, session_id: str | None) -> tuple[Session, Principal] | None:
        """The live session of a cookie and its key's principal, its idle time restarted;
        ``None`` (and the session ended) if it timed out or its key no longer admits it."""
        if not session_id:
            return None
        digest, now = digest_of(session_id), self._clock.now()
        stored = self._store.console_session(digest)
        if stored is None:
            return None
        idle = now - stored.last_seen
        if idle > self.idle_timeout or now - stored.started_at >= MAX_LIFETIME:
            self._store.end_console_session(digest)
            return None
        principal = live_principal(self._store.api_key(stored.key_id), stored, now)
        if principal is None:
            self._store.end_console_session(digest)
            return None
        if idle > self.idle_timeout * TOUCH_FRACTION:
            self._store.touch_console_session(digest, now)
        session = Session(stored.key_id, _csrf_of(session_id), stored.started_at, now)
        return session, principal

    def end(self, session_id: str | None) -> None:
        """End a session (sign-out); an unknown id is nothing to do."""
        if session_id:
            self._store.end_console_session(digest_of(session_id))


__all__ = [
    "MAX_LIFETIME",
    "TOUCH_FRACTION",
    "Session",
    "Sessions",
    "digest_of",
    "live_principal",
    "same_token",
]
