"""``MemoryService``: load → authorize → decide → encrypt → commit, for every operation.

The one object every adapter (HTTP, CLI, worker, client) talks to. It owns no rule of its
own: the rules are in :mod:`governed_memory.core`; the service fetches what a decision
needs, seals content with the subject's key, turns events into projection rows and search
postings, and hands the whole batch to the store in one commit.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from governed_memory.core import lifecycle
from governed_memory.core.access import require_agent, require_scope, visible
from governed_memory.core.commands import (
    ExpireMemory,
    ForgetSubject,
    PromoteMemory,
    RejectMemory,
    WriteMemory,
    parse_search,
)
from governed_memory.core.events import Event, StoredEvent, SubjectForgotten
from governed_memory.core.lifecycle import Context, SealedContent
from governed_memory.core.model import ItemState, MemoryItem, Principal
from governed_memory.core.policy import TtlPolicy
from governed_memory.core.projection import (
    Projection,
    apply,
    apply_forget,
    diff,
    replay,
)
from governed_memory.core.retrieval import (
    SearchQuery,
    admits,
    fit_budget,
    query_terms,
    rank,
    terms,
)
from governed_memory.core.values import (
    Scope,
    Status,
    Trust,
    idempotency_key,
    memory_id,
    subject_id,
    text,
)
from governed_memory.crypto import Keyring
from governed_memory.errors import (
    Conflict,
    CryptoError,
    IdempotencyKeyReused,
    IdempotencyKeyTaken,
    NotFound,
    PermissionDenied,
    StoreUnavailable,
    SubjectChanged,
    SubjectKeyGone,
    ValidationError,
    VersionConflict,
)
from governed_memory.ports import (
    Clock,
    Store,
    SystemClock,
)
from governed_memory.records import (
    Batch,
    IdempotencyRecord,
    IndexDoc,
    ItemChange,
    SearchRequest,
    SubjectKey,
)
from governed_memory.results import (
    AuditEvent,
    ForgetResult,
    QuarantinePage,
    ReplayReport,
    SearchHit,
    SearchResult,
    WriteResult,
    decode_cursor,
    encode_cursor,
)
from governed_memory.tokens import Tokenizer, default_tokenizer

if TYPE_CHECKING:
    from governed_memory.maintenance import Maintenance

log = logging.getLogger("governed_memory.service")

T = TypeVar("T")

SYSTEM_EXPIRY = "system:expiry"
MAX_KEY_RETRIES = 3
#: How far down the ranking the token-budget walk may go (SPEC §6.3) before it stops.
MAX_BUDGET_WALK = 1_000


def _fingerprint(data: Mapping[str, Any]) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _new_id() -> str:
    """A UUIDv7-layout id: time-ordered, so new rows land on the B-tree's last page."""
    millis = time.time_ns() // 1_000_000
    value = (millis & ((1 << 48) - 1)) << 80 | secrets.randbits(80)
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))


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
        new_id: Callable[[], str] = _new_id,
        listeners: Sequence[Callable[[Sequence[Event]], None]] = (),
    ) -> None:
        self.store = store
        self.keyring = keyring
        self.clock = clock or SystemClock()
        self.tokenizer = tokenizer or default_tokenizer()
        self.policy = policy or TtlPolicy()
        self._new_id = new_id
        self.listeners: list[Callable[[Sequence[Event]], None]] = list(listeners)

    @property
    def maintenance(self) -> Maintenance:
        """Whole-store operations: rebuild, export, import (``gmem replay|export|import``)."""
        from governed_memory.maintenance import Maintenance

        return Maintenance(self)

    def ping(self) -> None:
        """Raise ``StoreUnavailable`` unless the store answers (readiness)."""
        self.store.ping()

    def close(self) -> None:
        """Close the store; the service is unusable afterwards."""
        self.store.close()

    def _context(
        self, principal: Principal, key: str | None, now: datetime | None = None
    ) -> Context:
        return Context(
            now=now or self.clock.now(),
            principal=principal,
            new_id=self._new_id,
            idempotency_key=key,
            policy=self.policy,
        )

    # -- writes ---------------------------------------------------------------------------

    def write(
        self,
        principal: Principal,
        request: WriteMemory | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> WriteResult:
        """Create or rewrite an item. Untrusted writes land in quarantine."""
        command = request if isinstance(request, WriteMemory) else WriteMemory.parse(request)
        key = self._idempotency_key(idempotency_key)
        require_scope(principal, Scope.MEMORY_WRITE)
        require_agent(principal, command.agent_id)
        if not principal.may_claim(command.trust):
            raise PermissionDenied(
                f"this credential may write trust up to {principal.max_trust.value}, "
                f"not {command.trust.value}"
            )
        if key is not None:
            replayed = self._replay_write(principal, command, key)
            if replayed is not None:
                return replayed
        target_id = command.memory_id or self._new_id()
        subject_key = self.store.subject_key(principal.tenant_id, command.subject_id)
        for _ in range(MAX_KEY_RETRIES):
            if subject_key is None:
                # Decide without content before minting the key: a refused write must
                # not leave a key behind (a later forget would find one).
                self._dry_run(principal, command, key, target_id)
                subject_key = self._subject_key(
                    principal.tenant_id, command.subject_id, create=True
                )
                assert subject_key is not None
            try:
                return self._write_once(principal, command, key, target_id, subject_key)
            except SubjectKeyGone:
                # Forgotten concurrently: seal again under the subject's key of now, or a
                # fresh one if the write is still allowed.
                subject_key = self.store.subject_key(principal.tenant_id, command.subject_id)
            except IdempotencyKeyTaken:
                assert key is not None
                replayed = self._replay_write(principal, command, key)
                if replayed is None:  # pragma: no cover - the record exists by definition
                    raise
                return replayed
            except Conflict:
                # A twin retry (same key) may have committed after our first look for the
                # key's record, and changed the item under us: then this is its result.
                overtaken = None if key is None else self._replay_write(principal, command, key)
                if overtaken is None:
                    raise
                return overtaken
        raise StoreUnavailable("the subject's key kept changing during the write; retry")

    def _dry_run(
        self, principal: Principal, command: WriteMemory, key: str | None, target_id: str
    ) -> None:
        """Decide the write without content: raise as the real write would."""
        current = self.store.get(principal.tenant_id, target_id)
        supersedes = command.supersedes_id or (current.supersedes_id if current else None)
        target = self.store.get(principal.tenant_id, supersedes) if supersedes else None
        placeholder = SealedContent(b"", "", 0)
        ctx = self._context(principal, key)
        lifecycle.decide_write(ctx, command, target_id, placeholder, current, target)

    def _write_once(
        self,
        principal: Principal,
        command: WriteMemory,
        key: str | None,
        target_id: str,
        subject_key: SubjectKey,
    ) -> WriteResult:
        version = command.expected_version + 1
        blob = self.keyring.seal(subject_key, target_id, version, command.content)
        content_hash = self.keyring.content_hash(subject_key, command.content)
        sealed = SealedContent(blob, content_hash, self.tokenizer.count(command.content))
        current = self.store.get(principal.tenant_id, target_id)
        supersedes = command.supersedes_id or (current.supersedes_id if current else None)
        target = self.store.get(principal.tenant_id, supersedes) if supersedes else None
        ctx = self._context(principal, key)
        events = lifecycle.decide_write(ctx, command, target_id, sealed, current, target)
        index = self.index_doc(principal.tenant_id, command.content)
        known = {target_id: current} | ({target.id: target} if target is not None else {})
        changes = self._changes(events, known, {target_id: index})
        written = changes[0].item
        record = None
        if key is not None:
            record = IdempotencyRecord(
                principal.tenant_id,
                key,
                _fingerprint(command.fingerprint(content_hash)),
                {
                    "memory_id": target_id,
                    "version": written.version,
                    "created": current is None,
                },
            )
        self.store.commit(
            Batch(principal.tenant_id, events, changes, record, require_key=subject_key)
        )
        self._log(events)
        return WriteResult(MemoryItem.from_state(written, command.content), current is None)

    def _replay_write(
        self, principal: Principal, command: WriteMemory, key: str
    ) -> WriteResult | None:
        record = self.store.idempotency(principal.tenant_id, key)
        if record is None:
            return None
        subject_key = self._subject_key(principal.tenant_id, command.subject_id, create=False)
        content_hash = (
            self.keyring.content_hash(subject_key, command.content) if subject_key else ""
        )
        memory_id_ = record.result["memory_id"]
        if record.fingerprint != _fingerprint(
            command.fingerprint(content_hash)
        ) and not self._forgotten_since(principal.tenant_id, memory_id_, command):
            raise IdempotencyKeyReused(f"idempotency key {key!r} was used for a different request")
        item = self._item_at(principal, memory_id_, record.result["version"])
        return WriteResult(item, bool(record.result["created"]))

    def _forgotten_since(self, tenant: str, memory_id_: str, command: WriteMemory) -> bool:
        """Whether the keyed write's item has been forgotten since, so its content hash
        died with the subject's key and a retry can no longer be compared by content. The
        retry (of the same item and subject) then gets the first answer, without content;
        nothing is written either way."""
        current = self.store.get(tenant, memory_id_)
        return (
            current is not None
            and current.status is Status.DELETED
            and current.subject_id == command.subject_id
            and command.memory_id in (None, memory_id_)
        )

    def promote(
        self,
        principal: Principal,
        memory_id_: str,
        expected_version: int,
        *,
        idempotency_key: str | None = None,
    ) -> MemoryItem:
        """A reviewer (never the writer) makes a quarantined item active and verified."""
        command = PromoteMemory(memory_id(memory_id_), _version(expected_version))
        return self._review(principal, command, command.fingerprint(), idempotency_key, None)

    def reject(
        self,
        principal: Principal,
        memory_id_: str,
        expected_version: int,
        reason: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> MemoryItem:
        """A reviewer rejects a quarantined item; it stays in history, never retrieved."""
        if reason is not None:
            reason = text(reason, "reason", max_chars=1000)
        command = RejectMemory(memory_id(memory_id_), _version(expected_version), reason)
        return self._review(principal, command, command.fingerprint(), idempotency_key, reason)

    def _review(
        self,
        principal: Principal,
        command: PromoteMemory | RejectMemory,
        fingerprint: Mapping[str, Any],
        idempotency_key_: str | None,
        reason: str | None,
    ) -> MemoryItem:
        """Review once; a conflict caused by a twin retry (same key) that won replays it.

        Two retries of one key can both miss the key's record, then one commits and the
        other meets the item it changed: a version conflict that is really "already done".
        """
        try:
            return self._review_once(principal, command, fingerprint, idempotency_key_, reason)
        except Conflict:
            key = self._idempotency_key(idempotency_key_)
            replayed = None
            if key is not None:
                replayed = self._replay_review(principal, key, _fingerprint(fingerprint))
            if replayed is None:
                raise
            return replayed

    def _review_once(
        self,
        principal: Principal,
        command: PromoteMemory | RejectMemory,
        fingerprint: Mapping[str, Any],
        idempotency_key_: str | None,
        reason: str | None,
    ) -> MemoryItem:
        key = self._idempotency_key(idempotency_key_)
        require_scope(principal, Scope.MEMORY_REVIEW)
        digest = _fingerprint(fingerprint)
        if key is not None:
            replayed = self._replay_review(principal, key, digest)
            if replayed is not None:
                return replayed
        tenant = principal.tenant_id
        current = self.store.get(tenant, command.memory_id)
        ctx = self._context(principal, key)
        events: list[Event]
        if isinstance(command, PromoteMemory):
            target = None
            if current is not None and current.supersedes_id is not None:
                target = self.store.get(tenant, current.supersedes_id)
            events = lifecycle.decide_promote(ctx, command, current, target)
            known = {command.memory_id: current}
            if target is not None:
                known[target.id] = target
        else:
            sealed_reason = None
            # Decide once without the reason: a refused reject must not mint a subject key.
            lifecycle.decide_reject(ctx, command, current, None)
            if reason is not None and current is not None and visible(principal, current):
                subject_key = self._subject_key(tenant, current.subject_id, create=True)
                assert subject_key is not None
                sealed_reason = self.keyring.seal(
                    subject_key,
                    current.id,
                    current.version + 1,
                    reason,
                    purpose="reason",
                )
            events = lifecycle.decide_reject(ctx, command, current, sealed_reason)
            known = {command.memory_id: current}
        assert current is not None  # decide raised NotFound otherwise
        plaintext = self.decrypt(current) if isinstance(command, PromoteMemory) else None
        index = {current.id: self.index_doc(tenant, plaintext) if plaintext is not None else None}
        changes = self._changes(events, known, index)
        item = changes[0].item
        record = None
        if key is not None:
            record = IdempotencyRecord(
                tenant, key, digest, {"memory_id": item.id, "version": item.version}
            )
        try:
            self.store.commit(Batch(tenant, events, changes, record))
        except IdempotencyKeyTaken:
            assert key is not None
            replayed = self._replay_review(principal, key, digest)
            assert replayed is not None
            return replayed
        self._log(events)
        return MemoryItem.from_state(
            item, plaintext if plaintext is not None else self.decrypt(item)
        )

    def _replay_review(self, principal: Principal, key: str, digest: str) -> MemoryItem | None:
        record = self.store.idempotency(principal.tenant_id, key)
        if record is None:
            return None
        if record.fingerprint != digest:
            raise IdempotencyKeyReused(f"idempotency key {key!r} was used for a different request")
        return self._item_at(principal, record.result["memory_id"], record.result["version"])

    def forget_subject(
        self, principal: Principal, subject: str, *, idempotency_key: str | None = None
    ) -> ForgetResult:
        """Delete every item of the subject and destroy its key: the content is gone."""
        command = ForgetSubject(subject_id(subject))
        key = self._idempotency_key(idempotency_key)
        require_scope(principal, Scope.SUBJECT_FORGET)
        tenant = principal.tenant_id
        digest = _fingerprint(command.fingerprint())
        if key is not None:
            replayed = self._replay_forget(tenant, key, digest)
            if replayed is not None:
                return replayed
        for _ in range(MAX_KEY_RETRIES):
            items = self.store.subject_items(tenant, command.subject_id)
            subject_key = self.store.subject_key(tenant, command.subject_id)
            ctx = self._context(principal, key)
            events = lifecycle.decide_forget(ctx, command, items, subject_key is not None)
            changes: list[ItemChange] = []
            if events:
                forgotten = events[0]
                assert isinstance(forgotten, SubjectForgotten)
                changes = [
                    ItemChange(item, item.version - 1, None)
                    for item in apply_forget(items, forgotten)
                ]
            affected = len(changes)
            record = None
            if key is not None:
                record = IdempotencyRecord(
                    tenant,
                    key,
                    digest,
                    {"subject_id": command.subject_id, "affected": affected},
                )
            try:
                stored = self.store.commit(
                    Batch(tenant, events, changes, record, destroy_key=command.subject_id)
                )
            except (VersionConflict, SubjectChanged):
                continue  # an item of the subject changed meanwhile: look again
            except IdempotencyKeyTaken:
                assert key is not None
                replayed = self._replay_forget(tenant, key, digest)
                assert replayed is not None
                return replayed
            if subject_key is not None:
                self.keyring.forget_cached(subject_key.key_id)
            self._log(events)
            position = stored[0].position if stored else None
            return ForgetResult(command.subject_id, affected, position)
        raise StoreUnavailable("the subject kept changing during the forget; retry")

    def _replay_forget(self, tenant: str, key: str, digest: str) -> ForgetResult | None:
        record = self.store.idempotency(tenant, key)
        if record is None:
            return None
        if record.fingerprint != digest:
            raise IdempotencyKeyReused(f"idempotency key {key!r} was used for a different request")
        return ForgetResult(record.result["subject_id"], record.result["affected"], record.position)

    def expire_due(self, now: datetime | None = None, *, batch_size: int = 500) -> int:
        """Append ``memory.expired`` for every live item whose TTL has run out; count them.

        Safe with several instances: each expiry is a compare-and-swap on the item's
        version, so whichever instance commits first wins and the others skip the item.
        """
        now = now or self.clock.now()
        system = Principal("system", SYSTEM_EXPIRY, frozenset(), Trust.UNTRUSTED)
        expired = 0
        while True:
            due = self.store.due_for_expiry(now, batch_size)
            progressed = 0
            for item in due:
                ctx = Context(now=now, principal=system, new_id=self._new_id, policy=self.policy)
                try:
                    events = lifecycle.decide_expire(ctx, ExpireMemory(item.id, item.version), item)
                    changes = self._changes(events, {item.id: item}, {})
                    self.store.commit(Batch(item.tenant_id, events, changes))
                except (Conflict, NotFound):
                    continue  # changed or expired by someone else meanwhile
                except Exception as error:
                    if isinstance(error, StoreUnavailable):
                        raise
                    log.warning(
                        "expiry of one item failed",
                        extra={"error": type(error).__name__},
                    )
                    continue
                self._log(events)
                expired += 1
                progressed += 1
            if len(due) < batch_size or progressed == 0:
                return expired

    # -- reads ----------------------------------------------------------------------------

    def get(self, principal: Principal, memory_id_: str) -> MemoryItem:
        """One item of the caller's tenant and agents; content ``None`` once deleted."""
        require_scope(principal, Scope.MEMORY_READ)
        state = self._visible(principal, memory_id(memory_id_))
        return MemoryItem.from_state(state, self.decrypt(state))

    def history(self, principal: Principal, memory_id_: str) -> list[AuditEvent]:
        """Every event that changed the item, in order, without content."""
        require_scope(principal, Scope.AUDIT_READ)
        state = self._visible(principal, memory_id(memory_id_))
        projection = Projection()
        entries = []
        for stored in self.store.memory_events(state.tenant_id, state.id, state.subject_id):
            changed = [i for i in projection.fold(stored.event) if i.id == state.id]
            if not changed:
                continue
            entries.append(_audit(stored, changed[0].version))
        return entries

    def search(
        self, principal: Principal, request: SearchQuery | Mapping[str, Any]
    ) -> SearchResult:
        """Hard filters in the store's query, then ranking, then the token budget."""
        query = request if isinstance(request, SearchQuery) else parse_search(request)
        require_scope(principal, Scope.MEMORY_READ)
        require_agent(principal, query.agent_id)
        now = self.clock.now()
        words = query_terms(query.query)
        if not words:
            return SearchResult([], 0, 0, self.tokenizer.name)
        term_ids = self.keyring.term_ids(principal.tenant_id, words)
        # One snapshot for every read of the search: a write landing between the read of
        # the postings and the read of the rows could otherwise rank an item on one state
        # and return it, or leave out a better one, from another.
        with self.store.snapshot():
            return self._search(principal, query, term_ids, now)

    def _search(
        self, principal: Principal, query: SearchQuery, term_ids: list[int], now: datetime
    ) -> SearchResult:
        want = query.limit
        while True:
            matches = self.store.search(
                SearchRequest(
                    tenant_id=principal.tenant_id,
                    agent_id=query.agent_id,
                    purpose=query.purpose,
                    terms=term_ids,
                    now=now,
                    subject_id=query.subject_id,
                    kinds=query.kinds,
                    want=want,
                )
            )
            ranked = rank(matches.candidates, matches.statistics, term_ids, now)
            # A pruned answer is exact only for its first ``want`` places.
            exact = (ranked if matches.complete else ranked[:want])[:MAX_BUDGET_WALK]
            fitted = fit_budget(exact, query.limit, query.token_budget)
            if matches.complete or len(fitted.chosen) >= query.limit:
                break
            if fitted.used_tokens >= query.token_budget or want >= MAX_BUDGET_WALK:
                break  # nothing more can fit, or the walk has gone deep enough
            want *= 4  # the budget skipped too much: walk further down the ranking
        states = self.store.get_many(
            principal.tenant_id, [r.candidate.memory_id for r in fitted.chosen]
        )
        # One read for every subject key the hits need (a request-long cache, see decrypt).
        subjects = {state.subject_id for state in states.values()}
        stored_keys = self.store.subject_keys_for(principal.tenant_id, sorted(subjects))
        keys: dict[tuple[str, str], SubjectKey | None] = {
            (principal.tenant_id, subject): stored_keys.get(subject) for subject in subjects
        }
        hits = []
        for r in fitted.chosen:
            state = states.get(r.candidate.memory_id)
            if state is None or not admits(
                state,
                tenant_id=principal.tenant_id,
                agent_id=query.agent_id,
                purpose=query.purpose,
                now=now,
                subject_id=query.subject_id,
                kinds=query.kinds,
            ):
                continue  # changed between the two reads: never return what the filters refuse
            hits.append(
                SearchHit(
                    MemoryItem.from_state(state, self.decrypt(state, keys)),
                    r.score,
                    r.parts,
                    r.candidate.tokens,
                )
            )
        used = sum(hit.tokens for hit in hits)
        return SearchResult(hits, used, fitted.skipped, self.tokenizer.name)

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
        from governed_memory.core import values as v

        require_scope(principal, Scope.MEMORY_REVIEW)
        if agent_id is not None:
            v.agent_id(agent_id)
            if not principal.may_act_for(agent_id):
                raise PermissionDenied(f"this credential may not act for agent {agent_id!r}")
        if purpose is not None:
            v.purpose(purpose)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 500:
            raise ValidationError.field("limit", "must be between 1 and 500")
        after = decode_cursor(cursor) if cursor is not None else None
        rows = self.store.quarantine(
            principal.tenant_id, principal.agents, agent_id, purpose, limit + 1, after
        )
        page, more = rows[:limit], len(rows) > limit
        items = [MemoryItem.from_state(s, self.decrypt(s)) for s in page]
        next_cursor = encode_cursor(page[-1]) if more and page else None
        return QuarantinePage(items, next_cursor)

    def events_after(
        self, principal: Principal, after: int = 0, limit: int = 100
    ) -> list[AuditEvent]:
        """The tenant's audit feed: content-free events with a position above ``after``.

        The feed is tenant-wide (it names every agent's items), so a credential bound to
        some agents cannot read it; per-item history stays open to them.
        """
        require_scope(principal, Scope.AUDIT_READ)
        if principal.agents is not None:
            raise PermissionDenied("the audit feed is tenant-wide: it needs a key for every agent")
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise ValidationError.field("after", "must be an integer of 0 or more")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise ValidationError.field("limit", "must be between 1 and 1000")
        return [
            _audit(stored, stored.event.version)
            for stored in self.store.events_after(principal.tenant_id, after, limit)
        ]

    def verify_replay(self) -> ReplayReport:
        """Rebuild the projection from the log, tenant by tenant, and compare item by item."""
        events = items = 0
        differences: list[str] = []
        for tenant in self.store.tenants():
            with self.store.snapshot():  # the log and the items as of one moment
                log_events = [stored.event for stored in self.store.tenant_events(tenant)]
                live = {item.key: item for item in self.store.tenant_items(tenant)}
            events += len(log_events)
            try:
                rebuilt = replay(log_events)
            except Exception as error:  # noqa: BLE001 - reported, not raised
                differences.append(f"{tenant}: the log cannot be replayed: {error}")
                continue
            items += len(live)
            differences.extend(diff(rebuilt, live))
        return ReplayReport(events, items, differences)

    # -- helpers --------------------------------------------------------------------------

    def _visible(self, principal: Principal, memory_id_: str) -> ItemState:
        state = self.store.get(principal.tenant_id, memory_id_)
        if state is None or not visible(principal, state):
            raise NotFound(f"memory {memory_id_!r} not found")
        return state

    def _item_at(self, principal: Principal, memory_id_: str, version: int) -> MemoryItem:
        """The item as it was right after ``version`` (for idempotent replies)."""
        current = self.store.get(principal.tenant_id, memory_id_)
        if current is None or not visible(principal, current):
            # The key namespace is the tenant's; the item may belong to an agent this
            # caller cannot act for, and a replay must not show it more than a get would.
            raise NotFound(f"memory {memory_id_!r} not found")
        projection = Projection()
        state: ItemState | None = None
        for stored in self.store.memory_events(principal.tenant_id, memory_id_, current.subject_id):
            for changed in projection.fold(stored.event):
                if changed.id == memory_id_ and changed.version <= version:
                    state = changed
        if state is None:
            raise NotFound(f"memory {memory_id_!r} not found")
        content = None if current.status is Status.DELETED else self.decrypt(state)
        return MemoryItem.from_state(state, content)

    def _subject_key(self, tenant: str, subject: str, *, create: bool) -> SubjectKey | None:
        key = self.store.subject_key(tenant, subject)
        if key is None and create:
            key = self.store.add_subject_key(self.keyring.new_subject_key(tenant, subject))
        return key

    def decrypt(
        self,
        state: ItemState,
        keys: dict[tuple[str, str], SubjectKey | None] | None = None,
    ) -> str | None:
        """The plaintext of an item, ``None`` if deleted or its subject's key is gone.

        ``keys`` lets one request share its subject-key lookups between items; it lives
        only as long as that request.
        """
        if state.content is None:
            return None
        wanted = (state.tenant_id, state.subject_id)
        if keys is not None and wanted in keys:
            key = keys[wanted]
        else:
            key = self.store.subject_key(*wanted)
            if keys is not None:
                keys[wanted] = key
        if key is None or key.key_id != Keyring.key_id_of(state.content):
            if self._forgotten_meanwhile(state):
                return None  # the key is destroyed: the content is unrecoverable by design
            # A live item whose blob names a key its subject does not have: the blob was
            # altered or moved from another subject's item. An error, never "no content".
            log.error("sealed content names a foreign key", extra={"memory_id": state.id})
            raise CryptoError(f"memory {state.id!r}: sealed content failed authentication")
        try:
            return self.keyring.open(key, state.id, state.content_version, state.content)
        except CryptoError:
            log.error("sealed content failed authentication", extra={"memory_id": state.id})
            raise

    def _forgotten_meanwhile(self, state: ItemState) -> bool:
        """Whether ``state`` (read before its subject's key was looked up) is gone by now.

        A forget between reading an item and reading its key deletes the item and the key
        in one commit: the item read again is deleted (or its content is no longer the
        one read). Only a live item still holding the very same blob is suspicious.
        """
        current = self.store.get(state.tenant_id, state.id)
        if current is None or current.status is Status.DELETED:
            return True
        return current.content != state.content

    def index_doc(self, tenant: str, content: str) -> IndexDoc:
        """The search postings of a text, under the tenant's index key."""
        counts = terms(content)
        words = list(counts)
        ids = self.keyring.term_ids(tenant, words)
        merged: dict[int, int] = {}
        for term_id, word in zip(ids, words, strict=True):
            merged[term_id] = merged.get(term_id, 0) + counts[word]
        return IndexDoc(merged, sum(counts.values()))

    def _changes(
        self,
        events: Sequence[Event],
        known: Mapping[str, ItemState | None],
        indexes: Mapping[str, IndexDoc | None],
    ) -> list[ItemChange]:
        """Fold single-item events into projection rows with their postings."""
        changes = []
        states = dict(known)
        for event in events:
            assert event.memory_id is not None
            before = states.get(event.memory_id)
            after = apply(before, event)
            states[event.memory_id] = after
            index = indexes.get(after.id) if after.status is Status.ACTIVE else None
            changes.append(ItemChange(after, 0 if before is None else before.version, index))
        return changes

    @staticmethod
    def _idempotency_key(key: str | None) -> str | None:
        return None if key is None else idempotency_key(key)

    def _log(self, events: Sequence[Event]) -> None:
        """Tell the log and every listener (metrics) what committed; never any content."""
        for listener in self.listeners:
            try:
                listener(events)
            except Exception:
                log.exception("an event listener failed")
        for event in events:
            log.info(
                "event committed",
                extra={
                    "event_type": event.type,
                    "tenant_id": event.tenant_id,
                    "memory_id": event.memory_id,
                    "version": event.version,
                    "actor": event.actor,
                },
            )


def _version(value: object) -> int:
    from governed_memory.core.commands import version

    return version(value)


def _audit(stored: StoredEvent, version: int | None) -> AuditEvent:
    event = stored.event
    return AuditEvent(
        position=stored.position,
        event_id=event.event_id,
        type=event.type,
        memory_id=event.memory_id,
        version=version,
        occurred_at=event.occurred_at,
        actor=event.actor,
        subject_id=event.subject_id if isinstance(event, SubjectForgotten) else None,
    )


__all__ = [
    "AuditEvent",
    "ForgetResult",
    "MemoryService",
    "QuarantinePage",
    "ReplayReport",
    "SearchHit",
    "SearchResult",
    "WriteResult",
]
