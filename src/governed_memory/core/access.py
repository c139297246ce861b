"""Authorization rules, each stated once: scopes, agents, trust caps, and what a caller sees.

The service checks them before it looks up an idempotency key (so a replay is authorized
like the request it repeats) and the decide functions check them again; both call these
functions, so the rule and its words exist once.
"""

from __future__ import annotations

from collections.abc import Collection

from governed_memory.core.commands import WriteMemory
from governed_memory.core.model import ItemState, Principal
from governed_memory.core.retrieval import SearchQuery
from governed_memory.core.values import Scope, Trust
from governed_memory.errors import NotFound, PermissionDenied, SelfPromotion


def require_scope(principal: Principal, scope: Scope) -> None:
    """Refuse unless the credential carries ``scope``."""
    if not principal.has(scope):
        raise PermissionDenied(f"this credential lacks the scope {scope.value}")


def require_agent(principal: Principal, agent_id: str) -> None:
    """Refuse unless the credential may act for ``agent_id``."""
    if not principal.may_act_for(agent_id):
        raise PermissionDenied(f"this credential may not act for agent {agent_id!r}")


def require_write(principal: Principal, command: WriteMemory) -> None:
    """A write needs its scope, the agent it writes for, and trust within the key's cap."""
    require_scope(principal, Scope.MEMORY_WRITE)
    require_agent(principal, command.agent_id)
    if not principal.may_claim(command.trust):
        raise PermissionDenied(
            f"this credential may write trust up to {principal.max_trust.value}, "
            f"not {command.trust.value}"
        )


def require_review(principal: Principal) -> None:
    """Promotion and rejection need the review scope (which item: see ``require_visible``)."""
    require_scope(principal, Scope.MEMORY_REVIEW)


def require_four_eyes(
    principal: Principal, item: ItemState, action: str, writers: Collection[str] = ()
) -> None:
    """Refuse a review or erasure of an item its own principal wrote (SPEC §5: four eyes):
    its latest version, or any of ``writers`` (an erase destroys every version's content).

    Principals are compared, not keys: a second key of the same person is the same person.
    """
    if principal.principal_id in {item.written_by, *writers}:
        raise SelfPromotion(
            f"memory {item.id!r} was written by this principal; another principal must {action} it"
        )


def may_read_content(principal: Principal, item: ItemState) -> bool:
    """Whether the caller may read the item's content (given that it may see the item).

    Content nobody has vouched for — an item still ``untrusted``: quarantined, rejected,
    or expired before review — is shown only to reviewers (``memory:review``), whose work
    it is to read it. Any other reader sees the item with ``content`` withheld, so that
    untrusted text cannot reach an agent by id before a reviewer admits it (SPEC §1).
    """
    return item.trust is not Trust.UNTRUSTED or principal.has(Scope.MEMORY_REVIEW)


def require_forget(principal: Principal) -> None:
    """Forgetting needs its scope, and nothing else: erasure is subject-wide (SPEC §7)."""
    require_scope(principal, Scope.SUBJECT_FORGET)


def require_erase(principal: Principal) -> None:
    """Erasing one item needs the forget scope, as erasing a subject does; which item (and
    never one its own principal wrote) is the decision's to check."""
    require_scope(principal, Scope.SUBJECT_FORGET)


def require_browse(principal: Principal, agent_id: str | None) -> None:
    """Browsing needs the read scope, and the agent it names if it names one (a key bound
    to some agents sees only theirs either way)."""
    require_scope(principal, Scope.MEMORY_READ)
    if agent_id is not None:
        require_agent(principal, agent_id)


def require_search(principal: Principal, query: SearchQuery) -> None:
    """A search needs the read scope and the agent whose memories it searches."""
    require_scope(principal, Scope.MEMORY_READ)
    require_agent(principal, query.agent_id)


def require_feed(principal: Principal) -> None:
    """The audit feed names every agent's items: it needs its scope and a key for all agents.

    Per-item history stays open to agent-bound keys (``require_visible``).
    """
    require_scope(principal, Scope.AUDIT_READ)
    if principal.agents is not None:
        raise PermissionDenied("the audit feed is tenant-wide: it needs a key for every agent")


def visible(principal: Principal, item: ItemState) -> bool:
    """Whether the caller may know the item exists (its tenant, and an agent it acts for).

    Items that are not visible are reported as not found, never as forbidden, so that no
    endpoint becomes an oracle for another tenant's or agent's ids (SPEC §5).
    """
    return item.tenant_id == principal.tenant_id and principal.may_act_for(item.agent_id)


def require_visible(principal: Principal, item: ItemState | None, memory_id: str) -> ItemState:
    """The item, if the caller may know it exists; otherwise ``NotFound``, as if unknown."""
    if item is None or not visible(principal, item):
        raise NotFound(f"memory {memory_id!r} not found")
    return item
