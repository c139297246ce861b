"""``MemoryService``: every use case reads load → authorize → decide → seal → commit.

The one object every adapter (HTTP, CLI, worker, client) talks to. It owns no rule of its
own: the rules are in :mod:`governed_memory.core`. It loads what a decision needs, asks
the core, has the vault seal content with the subject's key, folds the events into
projection rows and search postings, and hands the whole batch to the store in one commit.

Its collaborators each hold one concern: the :class:`~.vault.Vault` keys, seals and opens
content; :class:`~.idempotency.Idempotency` answers retried requests;
:class:`~.retrieval.Retrieval` searches; :class:`~.audit.Audit` reads the log and the
review queue; :class:`~.maintenance.Maintenance` rebuilds, exports and imports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from governed_memory.core import access, commands, lifecycle, values
from governed_memory.core.commands import (
    ForgetSubject,
    PromoteMemory,
    RejectMemory,
    WriteMemory,
    parse_search,
)
from governed_memory.core.events import Event, StoredEvent, SubjectForgotten
from governed_memory.core.lifecycle import UNSEALED, Context
from governed_memory.core.model import ItemState, MemoryItem, Principal
from governed_memory.core.policy import TtlPolicy
from governed_memory.core.projection import apply_forget
from governed_memory.core.retrieval import SearchQuery
from governed_memory.core.values import Scope
from governed_memory.crypto import Keyring
from governed_memory.errors import SubjectChanged, SubjectKeyGone, VersionConflict
from governed_memory.ports import Clock, Store, SystemClock
from governed_memory.records import Batch, IndexDoc, ItemChange
from governed_memory.results import (
    AuditEvent,
    ForgetResult,
    QuarantinePage,
    ReplayReport,
    SearchResult,
    WriteResult,
)
from governed_memory.service._support import Listener, announce, changes, new_id, retried
from governed_memory.service.audit import Audit
from governed_memory.service.expiry import Expiry
from governed_memory.service.idempotency import (
    Idempotency,
    Keyed,
    fingerprint,
    parse_key,
    record_of,
)
from governed_memory.service.maintenance import Maintenance
from governed_memory.service.reading import shown
from governed_memory.service.retrieval import Retrieval
from governed_memory.service.vault import KeyCache, Vault
from governed_memory.tokens import Tokenizer, default_tokenizer


class MemoryService:
    """The governed memory lifecycle over one store."""

    def __init__(
        self,
        store: Store,
        keyring: Keyring,
        *,
        clock: Clock | None = None,
        tokenizer: Tokenizer | None = None,
        policy: TtlPolicy | None = None,
        new_id: Callable[[], str] = new_id,
        listeners: Sequence[Listener] = (),
    ) -> None:
        self.store = store
        self.keyring = keyring
        self.clock = clock or SystemClock()
        self.tokenizer = tokenizer or default_tokenizer()
        self.policy = policy or TtlPolicy()
        self.listeners: list[Listener] = list(listeners)
        self._new_id = new_id
        self._vault = Vault(store, keyring)
        self._idempotency = Idempotency(store, self._vault)
        self._retrieval = Retrieval(store, self._vault, self.tokenizer.name)
        self._audit = Audit(store, self._vault)
        self._expiry = Expiry(store, self._commit, new_id, self.policy)

    @property
    def maintenance(self) -> Maintenance:
        """Whole-store operations: rebuild, export, import (``gmem replay|export|import``)."""
        return Maintenance(self.store, self._vault)

    def ping(self) -> None:
        """Raise ``StoreUnavailable`` unless the store answers (readiness)."""
        self.store.ping()

    def close(self) -> None:
        """Close the store; the service is unusable afterwards."""
        self.store.close()

    # -- write ----------------------------------------------------------------------------

    def write(
        self,
        principal: Principal,
        request: WriteMemory | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> WriteResult:
        """Create or rewrite an item. Untrusted writes land in quarantine."""
        command = request if isinstance(request, WriteMemory) else WriteMemory.parse(request)
        key = parse_key(idempotency_key)
        access.require_write(principal, command)
        keyed = self._idempotency.for_write(principal, command, key)
        return self._idempotency.once(keyed, lambda: self._write(principal, command, keyed))

    def _write(
        self, principal: Principal, command: WriteMemory, keyed: Keyed[WriteResult] | None
    ) -> WriteResult:
        target_id = command.memory_id or self._new_id()
        return retried(
            lambda: self._write_once(principal, command, keyed, target_id),
            on=(SubjectKeyGone,),  # forgotten meanwhile: decide again, seal under today's key
            exhausted="the subject's key kept changing during the write; retry",
        )

    def _write_once(
        self,
        principal: Principal,
        command: WriteMemory,
        keyed: Keyed[WriteResult] | None,
        target_id: str,
    ) -> WriteResult:
        tenant, subject = principal.tenant_id, command.subject_id
        subject_key = self._vault.subject_key(tenant, subject)
        current = self.store.get(tenant, target_id)
        supersedes = command.supersedes_id or (current.supersedes_id if current else None)
        target = self.store.get(tenant, supersedes) if supersedes else None
        ctx = self._context(principal, keyed)
        events = lifecycle.decide_write(ctx, command, target_id, UNSEALED, current, target)
        # Only a write the rules allow may mint the subject's key: a refused write must not
        # leave a key behind (a later forget would find it).
        if subject_key is None:
            subject_key = self._vault.subject_key_or_new(tenant, subject)
        version, tokens = command.expected_version + 1, self.tokenizer.count(command.content)
        sealed = self._vault.seal_content(subject_key, target_id, version, command.content, tokens)
        events = lifecycle.with_content(events, sealed)
        known = {target_id: current} | ({target.id: target} if target is not None else {})
        rows = changes(events, known, {target_id: self._vault.index_doc(tenant, command.content)})
        written, created = rows[0].item, current is None
        digest = fingerprint(command.fingerprint(sealed.content_hash))
        result = {"memory_id": target_id, "version": written.version, "created": created}
        record = record_of(keyed, digest, result)
        self._commit(Batch(tenant, events, rows, record, require_key=subject_key))
        return WriteResult(MemoryItem.from_state(written, command.content), created)

    # -- review ---------------------------------------------------------------------------

    def promote(
        self,
        principal: Principal,
        memory_id: str,
        expected_version: int,
        *,
        idempotency_key: str | None = None,
    ) -> MemoryItem:
        """A reviewer (never the writer) makes a quarantined item active and verified."""
        command = PromoteMemory(values.memory_id(memory_id), commands.version(expected_version))
        return self._review(principal, command, idempotency_key)

    def reject(
        self,
        principal: Principal,
        memory_id: str,
        expected_version: int,
        reason: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> MemoryItem:
        """A reviewer rejects a quarantined item; it stays in history, never retrieved."""
        if reason is not None:
            reason = values.text(reason, "reason", max_chars=1000)
        command = RejectMemory(
            values.memory_id(memory_id), commands.version(expected_version), reason
        )
        return self._review(principal, command, idempotency_key)

    def _review(
        self,
        principal: Principal,
        command: PromoteMemory | RejectMemory,
        idempotency_key: str | None,
    ) -> MemoryItem:
        key = parse_key(idempotency_key)
        access.require_review(principal)
        digest = fingerprint(command.fingerprint())
        keyed = self._idempotency.for_review(principal, key, digest)
        return self._idempotency.once(
            keyed, lambda: self._review_once(principal, command, keyed, digest)
        )

    def _review_once(
        self,
        principal: Principal,
        command: PromoteMemory | RejectMemory,
        keyed: Keyed[MemoryItem] | None,
        digest: str,
    ) -> MemoryItem:
        tenant = principal.tenant_id
        current = self.store.get(tenant, command.memory_id)
        ctx = self._context(principal, keyed)
        plaintext: str | None = None
        if isinstance(command, PromoteMemory):
            events, known, plaintext = self._decide_promote(ctx, command, current)
        else:
            events, known = self._decide_reject(ctx, command, current), {command.memory_id: current}
        index = None if plaintext is None else self._vault.index_doc(tenant, plaintext)
        rows = changes(events, known, {command.memory_id: index})
        item = rows[0].item
        record = record_of(keyed, digest, {"memory_id": item.id, "version": item.version})
        self._commit(Batch(tenant, events, rows, record))
        content = plaintext if plaintext is not None else self._vault.decrypt(item)
        return MemoryItem.from_state(item, content)

    def _decide_promote(
        self, ctx: Context, command: PromoteMemory, current: ItemState | None
    ) -> tuple[list[Event], dict[str, ItemState | None], str | None]:
        """Promotion's events, the items they change, and the plaintext to index."""
        target = None
        if current is not None and current.supersedes_id is not None:
            target = self.store.get(current.tenant_id, current.supersedes_id)
        events = lifecycle.decide_promote(ctx, command, current, target)
        assert current is not None  # decide raised NotFound otherwise
        known: dict[str, ItemState | None] = {current.id: current}
        if target is not None:
            known[target.id] = target
        return events, known, self._vault.decrypt(current)

    def _decide_reject(
        self, ctx: Context, command: RejectMemory, current: ItemState | None
    ) -> list[Event]:
        """Rejection's events, the reason sealed only once the rules allow the rejection
        (so that a refused one mints no subject key)."""
        events = lifecycle.decide_reject(ctx, command, current, None)
        if command.reason is None:
            return events
        assert current is not None  # decide raised NotFound otherwise
        key = self._vault.subject_key_or_new(current.tenant_id, current.subject_id)
        return lifecycle.with_reason(events, self._vault.seal_reason(key, current, command.reason))

    # -- forget and expiry ----------------------------------------------------------------

    def forget_subject(
        self, principal: Principal, subject: str, *, idempotency_key: str | None = None
    ) -> ForgetResult:
        """Delete every item of the subject and destroy its key: the content is gone."""
        command = ForgetSubject(values.subject_id(subject))
        key = parse_key(idempotency_key)
        access.require_forget(principal)
        digest = fingerprint(command.fingerprint())
        keyed = self._idempotency.for_forget(principal, key, digest)
        return self._idempotency.once(
            keyed,
            lambda: retried(
                lambda: self._forget(principal, command, keyed, digest),
                on=(VersionConflict, SubjectChanged),  # an item changed meanwhile: look again
                exhausted="the subject kept changing during the forget; retry",
            ),
        )

    def _forget(
        self,
        principal: Principal,
        command: ForgetSubject,
        keyed: Keyed[ForgetResult] | None,
        digest: str,
    ) -> ForgetResult:
        tenant, subject = principal.tenant_id, command.subject_id
        items = self.store.subject_items(tenant, subject)
        subject_key = self._vault.subject_key(tenant, subject)
        ctx = self._context(principal, keyed)
        events = lifecycle.decide_forget(ctx, command, items, subject_key is not None)
        rows: list[ItemChange] = []
        if events:
            forgotten = events[0]
            assert isinstance(forgotten, SubjectForgotten)
            rows = [ItemChange(item, item.version - 1) for item in apply_forget(items, forgotten)]
        record = record_of(keyed, digest, {"subject_id": subject, "affected": len(rows)})
        stored = self._commit(Batch(tenant, events, rows, record, destroy_key=subject))
        if subject_key is not None:
            self._vault.destroyed(subject_key)
        return ForgetResult(subject, len(rows), stored[0].position if stored else None)

    def expire_due(self, now: datetime | None = None, *, batch_size: int = 500) -> int:
        """Append ``memory.expired`` for every live item whose TTL has run out; count them.

        Safe with several instances: each expiry is a compare-and-swap on the item's
        version, so whichever instance commits first wins and the others skip the item.
        """
        return self._expiry.sweep(now or self.clock.now(), batch_size)

    # -- reads ----------------------------------------------------------------------------

    def get(self, principal: Principal, memory_id: str) -> MemoryItem:
        """One item of the caller's tenant and agents; content ``None`` once deleted, and
        withheld from a caller without ``memory:review`` while the item is untrusted."""
        access.require_scope(principal, Scope.MEMORY_READ)
        memory_id = values.memory_id(memory_id)
        found = self.store.get(principal.tenant_id, memory_id)
        return shown(principal, access.require_visible(principal, found, memory_id), self._vault)

    def search(
        self, principal: Principal, request: SearchQuery | Mapping[str, Any]
    ) -> SearchResult:
        """Hard filters in the store's query, then ranking, then the token budget."""
        query = request if isinstance(request, SearchQuery) else parse_search(request)
        access.require_search(principal, query)
        return self._retrieval.search(principal.tenant_id, query, self.clock.now())

    def history(self, principal: Principal, memory_id: str) -> list[AuditEvent]:
        """Every event that changed the item, in order, without content."""
        return self._audit.history(principal, memory_id)

    def list_quarantine(
        self,
        principal: Principal,
        *,
        agent_id: str | None = None,
        purpose: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> QuarantinePage:
        """The review queue of the caller's tenant and agents, oldest first."""
        return self._audit.list_quarantine(
            principal, agent_id=agent_id, purpose=purpose, limit=limit, cursor=cursor
        )

    def events_after(
        self, principal: Principal, after: int = 0, limit: int = 100
    ) -> list[AuditEvent]:
        """The tenant's audit feed: content-free events with a position above ``after``.

        The feed is tenant-wide (it names every agent's items), so a credential bound to
        some agents cannot read it; per-item history stays open to them.
        """
        return self._audit.events_after(principal, after, limit)

    def verify_replay(self) -> ReplayReport:
        """Rebuild the projection from the log, tenant by tenant, and compare item by item."""
        return self._audit.verify_replay()

    def decrypt(self, state: ItemState, keys: KeyCache | None = None) -> str | None:
        """The plaintext of an item, ``None`` if deleted or its subject's key is gone."""
        return self._vault.decrypt(state, keys)

    def index_doc(self, tenant: str, content: str) -> IndexDoc:
        """The search postings of a text, under the tenant's index key."""
        return self._vault.index_doc(tenant, content)

    # -- helpers --------------------------------------------------------------------------

    def _context(self, principal: Principal, keyed: Keyed[Any] | None) -> Context:
        return Context(
            now=self.clock.now(),
            principal=principal,
            new_id=self._new_id,
            idempotency_key=None if keyed is None else keyed.key,
            policy=self.policy,
        )

    def _commit(self, batch: Batch) -> list[StoredEvent]:
        """Commit one batch, then tell the log and the listeners what it appended."""
        stored = self.store.commit(batch)
        announce(self.listeners, batch.events)
        return stored
