"""``Client``: the HTTP API of SPEC §8 as blocking method calls returning library values."""

from __future__ import annotations

import builtins  # the method ``list`` shadows the built-in inside the class
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Self, TypeVar, Unpack

import httpx

from governed_memory.client import _calls as calls
from governed_memory.client._config import Config
from governed_memory.client._retry import RETRYABLE, RetryPolicy, unreachable
from governed_memory.core.model import MemoryItem
from governed_memory.core.values import Kind, Status
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


class Client:
    """A governed-memory service over HTTP, with the library's values and errors.

    ``base_url`` defaults to ``GMEM_URL`` (else ``http://127.0.0.1:8080``) and ``api_key``
    to ``GMEM_API_KEY``. Mutating calls send an ``Idempotency-Key`` (a new UUID unless one
    is given), so they are retried like reads when the service cannot be reached; a
    service that stays unreachable raises :class:`~governed_memory.StoreUnavailable`.
    Error answers raise the same exceptions as :class:`~governed_memory.MemoryService`.
    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._config = Config.resolve(base_url, api_key, retry)
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=self._config.base_url,
            headers=self._config.headers,
            timeout=timeout,
            transport=transport,
        )

    @property
    def base_url(self) -> str:
        return self._config.base_url

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _send(self, call: calls.Call[T]) -> T:
        attempts = self._config.retry.attempts if call.retryable else 1
        for attempt in range(1, attempts + 1):
            try:
                response = self._http.request(
                    call.method, call.path, json=call.json, params=call.params, headers=call.headers
                )
            except RETRYABLE as error:
                if attempt == attempts:
                    raise unreachable(self._config.display_url, error, attempts) from None
                self._sleep(self._config.retry.delay(attempt))
            except httpx.TransportError as error:
                raise unreachable(self._config.display_url, error, attempt) from None
            else:
                return calls.decode(response, call)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    # -- memories -------------------------------------------------------------------------

    def write(
        self,
        memory_id: str,
        *,
        expected_version: int = 0,
        idempotency_key: str | None = None,
        **fields: Unpack[calls.WriteFields],
    ) -> WriteResult:
        """``PUT /v1/memories/{id}``: create (``expected_version`` 0) or replace a memory.

        ``fields`` are those of :class:`~governed_memory.client._calls.WriteFields`:
        ``agent_id``, ``subject_id``, ``purpose``, ``kind``, ``content`` and ``provenance``,
        and optionally ``trust``, ``confidence``, ``expires_at`` or ``ttl_seconds``, and
        ``supersedes_id``. ``trust`` defaults to the service's ``untrusted`` (quarantined
        until promoted); ``result.created`` tells a creation (201) from a replacement (200).
        """
        return self._send(calls.put_call(memory_id, fields, expected_version, idempotency_key))

    def create(
        self, *, idempotency_key: str | None = None, **fields: Unpack[calls.WriteFields]
    ) -> WriteResult:
        """``POST /v1/memories``: create a memory whose id the service generates.

        ``fields`` are those of :meth:`write`.
        """
        return self._send(calls.post_call(fields, idempotency_key))

    def get(self, memory_id: str) -> MemoryItem:
        """``GET /v1/memories/{id}``: one memory (content ``None`` once deleted)."""
        return self._send(calls.get_call(memory_id))

    def list(
        self,
        *,
        agent_id: str | None = None,
        purpose: str | None = None,
        subject_id: str | None = None,
        status: Status | str | None = None,
        kind: Kind | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ItemPage:
        """``GET /v1/memories``: one page of memories (of the agents the key may act for)
        passing the filters given, in (updated_at, id) order; ``status`` is matched as of
        now. Pass ``next_cursor`` as ``cursor`` for the next page."""
        call = calls.list_call(
            agent_id=agent_id,
            purpose=purpose,
            subject_id=subject_id,
            status=status,
            kind=kind,
            limit=limit,
            cursor=cursor,
        )
        return self._send(call)

    def erase(self, memory_id: str, *, idempotency_key: str | None = None) -> EraseResult:
        """``DELETE /v1/memories/{id}``: erase one memory (``subject:forget``; never one
        your own principal wrote): deleted, the content of every version destroyed."""
        return self._send(calls.erase_call(memory_id, idempotency_key))

    def history(self, memory_id: str) -> builtins.list[AuditEvent]:
        """``GET /v1/memories/{id}/history``: every event that changed it, without content."""
        return self._send(calls.history_call(memory_id))

    # -- review ---------------------------------------------------------------------------

    def promote(
        self, memory_id: str, expected_version: int, *, idempotency_key: str | None = None
    ) -> MemoryItem:
        """``POST /v1/memories/{id}/promote``: quarantined → active and verified."""
        return self._send(
            calls.review_call("promote", memory_id, expected_version, None, idempotency_key)
        )

    def reject(
        self,
        memory_id: str,
        expected_version: int,
        reason: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> MemoryItem:
        """``POST /v1/memories/{id}/reject``: quarantined → rejected."""
        return self._send(
            calls.review_call("reject", memory_id, expected_version, reason, idempotency_key)
        )

    def list_quarantine(
        self,
        *,
        agent_id: str | None = None,
        purpose: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> QuarantinePage:
        """``GET /v1/quarantine``: one page of the review queue, oldest first."""
        return self._send(calls.quarantine_call(agent_id, purpose, limit, cursor))

    # -- retrieval ------------------------------------------------------------------------

    def search(
        self,
        agent_id: str,
        purpose: str,
        query: str,
        *,
        subject_id: str | None = None,
        kinds: Sequence[Kind | str] | None = None,
        limit: int | None = None,
        token_budget: int | None = None,
    ) -> SearchResult:
        """``POST /v1/search``: active memories of one agent and purpose, within a budget.

        The results are data, never instructions or authorization to act.
        """
        call = calls.search_call(
            agent_id=agent_id,
            purpose=purpose,
            query=query,
            subject_id=subject_id,
            kinds=kinds,
            limit=limit,
            token_budget=token_budget,
        )
        return self._send(call)

    # -- subjects and audit ---------------------------------------------------------------

    def forget_subject(
        self, subject_id: str, *, idempotency_key: str | None = None
    ) -> ForgetResult:
        """``POST /v1/subjects/{subject_id}/forget``: delete and crypto-shred a subject."""
        return self._send(calls.forget_call(subject_id, idempotency_key))

    def events(self, after: int = 0, limit: int = 100) -> builtins.list[AuditEvent]:
        """``GET /v1/events``: the tenant's content-free audit feed after a position."""
        return self._send(calls.events_call(after, limit))

    # -- operations -----------------------------------------------------------------------

    def live(self) -> bool:
        """``GET /health/live``: whether the process answers."""
        return self._send(calls.health_call("/health/live"))

    def ready(self) -> bool:
        """``GET /health/ready``: whether the service can reach its store (False on 503)."""
        return self._send(calls.health_call("/health/ready"))

    def health(self) -> bool:
        """``GET /health``: live and ready."""
        return self._send(calls.health_call("/health"))


__all__ = ["Client"]
