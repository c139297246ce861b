"""The review queue and the item page: read, promote, reject.

Every page asks the same service object as the API, as the signed-in key: scopes, agents,
four eyes and expected versions are the service's to enforce, and a refusal is shown as
the problem the API would answer (its title and detail, with its status).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Query, Request
from starlette.responses import Response

from governed_memory.core.model import MemoryItem, Principal
from governed_memory.core.values import ID_PATTERN, Scope
from governed_memory.errors import (
    Conflict,
    GovernedMemoryError,
    NotFound,
    PermissionDenied,
    ValidationError,
)
from governed_memory.http.console.access import (
    PREFIX,
    ConsoleDep,
    Reviewer,
    ReviewerDep,
    back_to,
    note,
    require_csrf,
    see_other,
)
from governed_memory.http.console.pages import (
    age,
    problem_of,
    query_string,
    render,
    word_diff,
)
from governed_memory.results import AuditEvent
from governed_memory.service import MemoryService

router = APIRouter(include_in_schema=False)

#: Rows per page of the queue and of a subject's memories.
PAGE_SIZE = 25
FormText = Annotated[str, Form()]
Filter = Annotated[str, Query(max_length=512)]
#: The notices a page shows after a post sent the reviewer back to it, naming the memory
#: only when the query's ``memory`` is an id (the notice never echoes other text).
MEMORY_ID = re.compile(ID_PATTERN)
DONE = {"promoted": "Promoted", "rejected": "Rejected"}
#: Each review action's word in the ``done`` parameter of the page it sends back to.
PAST = {"promote": "promoted", "reject": "rejected"}


def _or_none(value: str) -> str | None:
    return value.strip() or None


def _version(text: str) -> int:
    """The form's expected version as a number (the service checks it is current)."""
    text = text.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise ValidationError.field("expected_version", "must be a whole number")
    return int(text)


def _count(console: ConsoleDep, error: GovernedMemoryError) -> None:
    """Count a conflict in the metrics, as the API's error handler does."""
    if console.metrics is not None and isinstance(error, Conflict):
        console.metrics.observe_conflict(error)


def _refused(reviewer: Reviewer, error: GovernedMemoryError, console: ConsoleDep) -> Response:
    _count(console, error)
    problem = problem_of(error)
    return render("problem.html", problem.status, reviewer=reviewer, problem=problem)


@router.get(f"{PREFIX}/quarantine")
def quarantine(
    request: Request,
    reviewer: ReviewerDep,
    console: ConsoleDep,
    agent_id: Filter = "",
    purpose: Filter = "",
    kind: Filter = "",
    subject_id: Filter = "",
    cursor: Filter = "",
    done: Filter = "",
    memory: Filter = "",
) -> Response:
    """Every quarantined item the key may see, newest first, filtered, a page at a time."""
    filters = {"agent_id": agent_id, "purpose": purpose, "kind": kind, "subject_id": subject_id}
    try:
        page = console.service.browse(
            reviewer.principal,
            status="quarantined",
            limit=PAGE_SIZE,
            cursor=_or_none(cursor),
            order="newest",
            **{name: _or_none(value) for name, value in filters.items()},
        )
    except GovernedMemoryError as error:
        return _refused(reviewer, error, console)
    now = console.service.clock.now()
    here = request.url.path + query_string(filters | {"cursor": cursor})
    return render(
        "quarantine.html",
        reviewer=reviewer,
        items=page.items,
        ages={item.id: age(item.updated_at, now) for item in page.items},
        filters=filters,
        next_page=None
        if page.next_cursor is None
        else query_string(filters | {"cursor": page.next_cursor}),
        can_review=reviewer.principal.has(Scope.MEMORY_REVIEW),
        here=here,
        notice=(DONE[done], memory) if done in DONE and MEMORY_ID.fullmatch(memory) else None,
    )


def _history(service: MemoryService, principal: Principal, item: MemoryItem) -> list[AuditEvent]:
    """The item's history, or none where the key may not read it (no ``audit:read``)."""
    try:
        return service.history(principal, item.id)
    except PermissionDenied:
        return []


def _superseded(
    service: MemoryService, principal: Principal, item: MemoryItem
) -> MemoryItem | None:
    """The memory a correction supersedes (or would), if the key may see it."""
    if item.supersedes_id is None:
        return None
    try:
        return service.get(principal, item.supersedes_id)
    except (NotFound, PermissionDenied):
        return None


def _item_page(
    reviewer: Reviewer, console: ConsoleDep, memory_id: str, *, status: int = 200, **extra: object
) -> Response:
    service, principal = console.service, reviewer.principal
    item = service.get(principal, memory_id)
    old = _superseded(service, principal, item)
    diff = None if old is None else word_diff(old.content, item.content)
    return render(
        "memory.html",
        status,
        reviewer=reviewer,
        item=item,
        history=_history(service, principal, item),
        may_audit=principal.has(Scope.AUDIT_READ),
        superseded=old,
        diff=diff,
        can_review=principal.has(Scope.MEMORY_REVIEW),
        **extra,
    )


@router.get(f"{PREFIX}/memories/{{memory_id}}")
def memory(
    memory_id: str, reviewer: ReviewerDep, console: ConsoleDep, done: Filter = ""
) -> Response:
    """One memory: content, provenance, status, history, and what it would supersede."""
    try:
        return _item_page(reviewer, console, memory_id, notice=DONE.get(done))
    except GovernedMemoryError as error:
        return _refused(reviewer, error, console)


def _after_review(
    reviewer: Reviewer,
    console: ConsoleDep,
    memory_id: str,
    action: str,
    back: str,
    run: Callable[[], object],
) -> Response:
    """Run a review action; back to where the form came from, or the item with the problem."""
    try:
        run()
    except GovernedMemoryError as error:
        note(action, reviewer, type(error).slug, memory_id=memory_id)
        _count(console, error)
        problem = problem_of(error)
        try:
            return _item_page(reviewer, console, memory_id, status=problem.status, problem=problem)
        except GovernedMemoryError:  # the item itself is not the key's to see
            return render("problem.html", problem.status, reviewer=reviewer, problem=problem)
    note(action, reviewer, "ok", memory_id=memory_id)
    default = f"{PREFIX}/memories/{memory_id}"
    target = back_to(back, default)
    joiner = "&" if "?" in target else "?"
    return see_other(f"{target}{joiner}done={PAST[action]}&memory={quote(memory_id, safe='')}")


@router.post(f"{PREFIX}/memories/{{memory_id}}/promote")
def promote(
    memory_id: str,
    reviewer: ReviewerDep,
    console: ConsoleDep,
    expected_version: FormText = "",
    csrf_token: FormText = "",
    back: FormText = "",
) -> Response:
    """Promote, as ``POST /v1/memories/{id}/promote`` does."""

    def run() -> None:
        require_csrf(reviewer, csrf_token)
        console.service.promote(reviewer.principal, memory_id, _version(expected_version))

    return _after_review(reviewer, console, memory_id, "promote", back, run)


@router.post(f"{PREFIX}/memories/{{memory_id}}/reject")
def reject(
    memory_id: str,
    reviewer: ReviewerDep,
    console: ConsoleDep,
    expected_version: FormText = "",
    reason: FormText = "",
    csrf_token: FormText = "",
    back: FormText = "",
) -> Response:
    """Reject with an optional reason, as ``POST /v1/memories/{id}/reject`` does."""

    def run() -> None:
        require_csrf(reviewer, csrf_token)
        version = _version(expected_version)
        console.service.reject(reviewer.principal, memory_id, version, _or_none(reason))

    return _after_review(reviewer, console, memory_id, "reject", back, run)


__all__ = ["PAGE_SIZE", "router"]
