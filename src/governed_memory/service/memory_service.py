"""``MemoryService``: every use case reads load → authorize → decide → seal → commit.

The one object every adapter (HTTP, CLI, worker, client) talks to. It owns no rule of its
own: the rules are in :mod:`governed_memory.core`. It loads what a decision needs, asks
the core, has the vault seal content with the subject's key, folds the events into
projection rows and search postings, and hands the whole batch to the store in one commit.

Its collaborators each hold one concern: the :class:`~.vault.Vault` keys, seals and opens
content; :class:`~.idempotency.Idempotency` answers retried requests; :class:`~.reads.Reads`
reads items by id or page; :class:`~.retrieval.Retrieval` searches; :class:`~.audit.Audit`
reads the log and the review queue; :class:`~.erasure.Erasure` erases single items;
:class:`~.expiry.Expiry` and :class:`~.expiry.Retention` sweep for the worker;
:class:`~.maintenance.Maintenance` rebuilds, exports and imports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from governed_memory.core import access, commands, lifecycle, values
from governed_memory.core.commands import (
    PromoteMemory,
    RejectMemory,
    WriteMemory,
    parse_search,
)
from governed_memory.core.events import StoredEvent
from governed_memory.core.lifecycle import UNSEALED, Context
from governed_memory.core.model import ItemState, MemoryItem, Principal
from governed_memory.core.policy import RetentionPolicy, TtlPolicy
from governed_memory.core.retrieval import SearchQuery
from governed_memory.crypto import Keyring
from governed_memory.errors import (
    GovernedMemoryError,
    ReadWouldWait,
    StoreUnavailable,
    SubjectKeyGone,
)
from governed_memory.ports import Clock, Store, SystemClock
from governed_memory.records import Batch, IndexDoc, SubjectKey
from governed_memory.results import (
    AuditEvent,
    EraseResult,
    ForgetResult,
    ItemPage,
    ReplayReport,
    SearchResult,
    WriteResult,
)
from governed_memory.service._support import (
    Listener,
    Parts,
    announce,
    changes,
    new_id,
    retried,
)
from governed_memory.service.audit import Audit
from governed_memory.service.erasure import Erasure
from governed_memory.service.expiry import Expiry, Retention, RetentionReport
from governed_memory.service.idempotency import (
    Idempotency,
    Keyed,
    fingerprint,
    parse_key,
    record_of,
)
from governed_memory.service.indexing import Indexer, SearchSettings
from governed_memory.service.maintenance import Maintenance
from governed_memory.service.progress import OnStep, silent
from governed_memory.service.reads import Reads
from governed_memory.service.retrieval import Retrieval
from governed_memory.service.review import Review
from governed_memory.service.vault import KeyCache, Vault
from governed_memory.service.verify import Verify
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
        retention: RetentionPolicy | None = None,
        new_id: Callable[[], str] = new_id,
        listeners: Sequence[Listener] = (),
        search: SearchSettings | None = None,
    ) -> None:
        self.store = store
        self.keyring = keyring
        self.clock = clock or SystemClock()
        self.tokenizer = tokenizer or default_tokenizer()
        self.policy = policy or TtlPolicy()
        self.retention = retention or RetentionPolicy()
        self.listeners: list[Listener] = list(listeners)
        self._new_id = new_id
        self._vault = vault = Vault(store, keyring)
        self._indexer = indexer = Indexer(vault, search or SearchSettings())
        self._idempotency = Idempotency(store, vault)
        self._reads = Reads(store, vault)
        self._retrieval = Retrieval(store, vault, indexer, self.tokenizer.name)
        self._audit = Audit(store, vault, self._reads)
        parts = Parts(store, vault, self._idempotency, self._commit, self._context, indexer)
        self._review = Review(parts)
        self._erasure = Erasure(parts)
        self._expiry = Expiry(store, self._commit, new_id, self.policy)
        self._retention = Retention(store, vault, self._commit, new_id, self.retention)

    @property
    def maintenance(self) -> Maintenance:
        """Whole-store operations: rebuild, export, import (``gmem replay|export|import``)."""
        return Maintenance(self.store, self._vault, self._indexer)

    @property
    def search_signature(self) -> str:
        """How this service builds the search index (recorded in the store: .indexing)."""
        return self._indexer.signature

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
        target_id = command.memory_id or self._new_id()
        created = self._create_unread(principal, command, keyed, target_id)
        if created is not None:
            return created
        return self._idempotency.once(
            keyed, lambda: self._write(principal, command, keyed, target_id)
        )

    def _create_unread(
        self,
        principal: Principal,
        command: WriteMemory,
        keyed: Keyed[WriteResult] | None,
        target_id: str,
    ) -> WriteResult | None:
        """A create (expected version 0, no correction) of an item of a subject whose key a
        commit of this process found live lately, decided and committed without reading
        first; ``None`` when the write must take the full path, which reads.

        The decision reads nothing else: with no current item and no correction target
        it depends on the command and the caller alone. What it assumed, the commit
        checks under the write lock, as for every write: the idempotency key is unused
        (its record's key), the subject key is the one sealed with (a forget destroyed
        it: ``SubjectKeyGone``), the item does not exist (the id's unique key, or the
        guard on version 0). Any refusal, or any error the decision raises, sends the
        write down the full path from the start: a keyed one looks its record up first
        (a replay answers as before), each reads what it decides on, and a clash is
        classified from that read, so an item the caller cannot see keeps its version
        hidden. Nothing is left behind by a refused attempt: the subject's key already
        existed and the item's fresh key is stored only with the item. A failure of the
        store itself ends an unkeyed write as before (the commit may have landed, and
        only a keyed write can tell by its record); a keyed one then takes the full path,
        which finds its record if it did.
        """
        if command.expected_version != 0 or command.supersedes_id is not None:
            return None
        subject_key = self._vault.confirmed_key(principal.tenant_id, command.subject_id)
        if subject_key is None:
            return None
        try:
            return self._decide_and_commit(
                principal, command, keyed, target_id, subject_key, None, None
            )
        except StoreUnavailable:
            if keyed is None:
                raise
            return None
        except GovernedMemoryError:  # refused or undecided: decide again on what is read
            return None

    def _write(
        self,
        principal: Principal,
        command: WriteMemory,
        keyed: Keyed[WriteResult] | None,
        target_id: str,
    ) -> WriteResult:
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
        subject_key, current = self.store.write_state(tenant, subject, target_id)
        supersedes = command.supersedes_id or (current.supersedes_id if current else None)
        target = self.store.get(tenant, supersedes) if supersedes else None
        return self._decide_and_commit(
            principal, command, keyed, target_id, subject_key, current, target
        )

    def _decide_and_commit(
        self,
        principal: Principal,
        command: WriteMemory,
        keyed: Keyed[WriteResult] | None,
        target_id: str,
        subject_key: SubjectKey | None,
        current: ItemState | None,
        target: ItemState | None,
    ) -> WriteResult:
        """Decide the write on what was read (or, for :meth:`_create_unread`, known), seal
        it and commit it; the subject key is then confirmed live (``Vault.confirm``)."""
        tenant, subject = principal.tenant_id, command.subject_id
        ctx = self._context(principal, keyed)
        events = lifecycle.decide_write(ctx, command, target_id, UNSEALED, current, target)
        # Only a write the rules allow may mint the subject's key: a refused write must not
        # leave a key behind (a later forget would find it).
        if subject_key is None:
            subject_key = self._vault.subject_key_or_new(tenant, subject)
        sealing_key, item_key = self._vault.key_for_write(subject_key, target_id, current)
        version, tokens = command.expected_version + 1, self.tokenizer.count(command.content)
        sealed = self._vault.seal_content(sealing_key, version, command.content, tokens)
        events = lifecycle.with_content(events, sealed)
        known = {target_id: current} | ({target.id: target} if target is not None else {})
        rows = changes(
            events, known, {target_id: self._indexer.entry(tenant, command.content, sealing_key)}
        )
        written, created = rows[0].item, current is None
        record = None
        if keyed is not None:  # a request without a key has no record to tell it again by
            digest = fingerprint(command.fingerprint(sealed.content_hash))
            result = {"memory_id": target_id, "version": written.version, "created": created}
            record = record_of(keyed, digest, result)
        batch = Batch(
            tenant,
            events,
            rows,
            record,
            require_key=subject_key,
            new_item_key=item_key,
            index_signature=self._indexer.signature_of(rows),
        )
        try:
            self._commit(batch)
        except SubjectKeyGone:
            self._vault.unconfirm(subject_key)
            raise
        self._vault.confirm(subject_key)
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
        return self._review.review(principal, command, idempotency_key)

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
        return self._review.review(principal, command, idempotency_key)

    # -- forget and expiry ----------------------------------------------------------------

    def forget_subject(
        self, principal: Principal, subject: str, *, idempotency_key: str | None = None
    ) -> ForgetResult:
        """Delete every item of the subject and destroy its key: the content is gone."""
        return self._erasure.forget(principal, subject, idempotency_key)

    def expire_due(self, now: datetime | None = None, *, batch_size: int = 500) -> int:
        """Append ``memory.expired`` for every live item whose TTL has run out; count them.

        Safe with several instances: each expiry is a compare-and-swap on the item's
        version, so whichever instance commits first wins and the others skip the item.
        """
        return self._expiry.sweep(now or self.clock.now(), batch_size)

    def apply_retention(
        self, now: datetime | None = None, *, batch_size: int = 500
    ) -> RetentionReport:
        """Destroy the content of every expired, rejected or superseded item whose
        retention window has run out (``memory.content_destroyed``, the item's key gone).

        Safe with several instances, like expiry. Items written before items had keys of
        their own are skipped and counted (only forgetting their subject destroys them).
        """
        return self._retention.sweep(now or self.clock.now(), batch_size)

    def erase(
        self, principal: Principal, memory_id: str, *, idempotency_key: str | None = None
    ) -> EraseResult:
        """Erase one item: deleted, every version's content destroyed with its own key."""
        return self._erasure.erase(principal, memory_id, idempotency_key)

    # -- reads ----------------------------------------------------------------------------

    def get(self, principal: Principal, memory_id: str) -> MemoryItem:
        """One item of the caller's tenant and agents as it is now (``expired`` once its
        ``expires_at`` passed); content ``None`` once destroyed, and withheld from a caller
        without ``memory:review`` while the item is untrusted."""
        return self._reads.get(principal, memory_id, self.clock.now())

    def browse(
        self,
        principal: Principal,
        *,
        agent_id: str | None = None,
        purpose: str | None = None,
        subject_id: str | None = None,
        status: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        order: str | None = None,
    ) -> ItemPage:
        """A page of the caller's items passing the filters, in (updated_at, id) order
        (``order``: ``oldest`` first, the default, or ``newest``; a cursor pages on in the
        order it was made in);
        ``status`` is matched as of now (a live item past its expiry is ``expired``)."""
        return self._reads.browse(
            principal,
            agent_id=agent_id,
            purpose=purpose,
            subject_id=subject_id,
            status=status,
            kind=kind,
            limit=limit,
            cursor=cursor,
            now=self.clock.now(),
            order=order,
        )

    @property
    def searches_at_once(self) -> bool:
        """Whether a search asked not to wait (``search(..., wait=False)``) can be made:
        the store can answer one promptly and no query is embedded (semantic recall)."""
        return self.store.prompt_searches and self._indexer.settings.embedder is None

    def search(
        self,
        principal: Principal,
        request: SearchQuery | Mapping[str, Any],
        *,
        wait: bool = True,
    ) -> SearchResult:
        """Hard filters in the store's query, then ranking, then the token budget.

        With ``wait=False`` (the HTTP edge, asking on its event loop) the search is made
        only if it is short and waits for nothing; otherwise ``ReadWouldWait`` is raised
        before any result is made, and the caller asks again where it may wait. Refused
        so: a search with semantic recall on (embedding the query is long), a store that
        cannot read without waiting (over a network), a scope too large to be searched
        at once (see ``Store.prompt``), a busy database. The search made is the same
        either way: same filters, ranking, budget and result.
        """
        query = request if isinstance(request, SearchQuery) else parse_search(request)
        access.require_search(principal, query)
        if wait:
            return self._retrieval.search(principal.tenant_id, query, self.clock.now())
        if not self.searches_at_once:
            raise ReadWouldWait("this search is not made at once")
        with self.store.prompt():
            return self._retrieval.search(principal.tenant_id, query, self.clock.now())

    def history(self, principal: Principal, memory_id: str) -> list[AuditEvent]:
        """Every event that changed the item, in order: no content but the reasons of
        rejections (while the item's content lives)."""
        return self._audit.history(principal, memory_id)

    def list_quarantine(
        self,
        principal: Principal,
        *,
        agent_id: str | None = None,
        purpose: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> ItemPage:
        """The review queue of the caller's tenant and agents, oldest first."""
        return self._audit.list_quarantine(
            principal,
            agent_id=agent_id,
            purpose=purpose,
            limit=limit,
            cursor=cursor,
            now=self.clock.now(),
        )

    def events_after(
        self, principal: Principal, after: int = 0, limit: int = 100
    ) -> list[AuditEvent]:
        """The tenant's audit feed: content-free events with a position above ``after``.

        The feed is tenant-wide (it names every agent's items), so a credential bound to
        some agents cannot read it; per-item history stays open to them.
        """
        return self._audit.events_after(principal, after, limit)

    def events_before(
        self, principal: Principal, before: int | None = None, limit: int = 100
    ) -> list[AuditEvent]:
        """The tenant's audit feed newest first: content-free events with a position below
        ``before`` (from the latest when None); the same access as :meth:`events_after`."""
        return self._audit.events_before(principal, before, limit)

    def verify_replay(self, on_step: OnStep = silent) -> ReplayReport:
        """Rebuild the projection from the log, tenant by tenant, and compare item by item;
        compare the search index with what the items' content makes (:mod:`.verify`;
        ``on_step``: see :mod:`.progress`)."""
        return Verify(self.store, self._vault, self._indexer).run(on_step)

    def decrypt(self, state: ItemState, keys: KeyCache | None = None) -> str | None:
        """The plaintext of an item, ``None`` if deleted or its subject's key is gone."""
        return self._vault.decrypt(state, keys)

    def index_doc(self, tenant: str, content: str) -> IndexDoc:
        """The search postings of a text (no vector), by the tenant's analyzer, under the
        tenant's index key."""
        return self._vault.index_doc(tenant, self._indexer.settings.analyzer_for(tenant), content)

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
