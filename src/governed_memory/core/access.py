"""Authorization rules shared by every decision: scopes, agents, and what a caller may see."""

from __future__ import annotations

from governed_memory.core.model import ItemState, Principal
from governed_memory.core.values import Scope
from governed_memory.errors import PermissionDenied


def require_scope(principal: Principal, scope: Scope) -> None:
    """Refuse unless the credential carries ``scope``."""
    if not principal.has(scope):
        raise PermissionDenied(f"this credential lacks the scope {scope.value}")


def require_agent(principal: Principal, agent_id: str) -> None:
    """Refuse unless the credential may act for ``agent_id``."""
    if not principal.may_act_for(agent_id):
        raise PermissionDenied(f"this credential may not act for agent {agent_id!r}")


def visible(principal: Principal, item: ItemState) -> bool:
    """Whether the caller may know the item exists (its tenant, and an agent it acts for).

    Items that are not visible are reported as not found, never as forbidden, so that no
    endpoint becomes an oracle for another tenant's or agent's ids (SPEC §5).
    """
    return item.tenant_id == principal.tenant_id and principal.may_act_for(item.agent_id)
