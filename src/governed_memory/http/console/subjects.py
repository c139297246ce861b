"""A subject's memories and forgetting it; the tenant's audit feed.

Forgetting is final (the subject's key is destroyed), so its form asks the reviewer to
retype the subject id; anything else is refused before the service is asked. The answer
is the forget receipt: the position of its event and how many memories it deleted.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Query, Request
from starlette.responses import Response

from governed_memory.core.events import EVENT_TYPES
from governed_memory.core.values import Scope
from governed_memory.errors import Conflict, GovernedMemoryError, ValidationError
from governed_memory.http.console.access import (
    PREFIX,
    ConsoleDep,
    Reviewer,
    ReviewerDep,
    note,
    require_csrf,
    see_other,
)
from governed_memory.http.console.pages import age, problem_of, query_string, render
from governed_memory.http.console.review import PAGE_SIZE
from governed_memory.results import AuditEvent, ForgetResult

router = APIRouter(include_in_schema=False)

FormText = Annotated[str, Form()]
Filter = Annotated[str, Query(max_length=512)]
#: Events read per page of the feed, and how many reads one page may make to fill it
#: with events of the chosen type.
FEED_PAGE = 100
FEED_READS = 10


def _subject_page(
    request: Request,
    reviewer: Reviewer,
    console: ConsoleDep,
    subject_id: str,
    cursor: str | None,
    *,
    status: int = 200,
    **extra: object,
) -> Response:
    page = console.service.browse(
        reviewer.principal, subject_id=subject_id, limit=PAGE_SIZE, cursor=cursor
    )
    now = console.service.clock.now()
    return render(
        "subject.html",
        status,
        reviewer=reviewer,
        subject_id=subject_id,
        items=page.items,
        ages={item.id: age(item.updated_at, now) for item in page.items},
        next_page=None if page.next_cursor is None else query_string({"cursor": page.next_cursor}),
        can_forget=reviewer.principal.has(Scope.SUBJECT_FORGET),
        **extra,
    )


def _refused(reviewer: Reviewer, error: GovernedMemoryError) -> Response:
    problem = problem_of(error)
    return render("problem.html", problem.status, reviewer=reviewer, problem=problem)


@router.get(f"{PREFIX}/subjects")
def find_subject(reviewer: ReviewerDep, subject_id: Filter = "") -> Response:
    """The subject search box's target: on to that subject's page."""
    if not subject_id.strip():
        return see_other(f"{PREFIX}/quarantine")
    return see_other(f"{PREFIX}/subjects/{quote(subject_id.strip(), safe='')}")


@router.get(f"{PREFIX}/subjects/{{subject_id}}")
def subject(
    request: Request,
    subject_id: str,
    reviewer: ReviewerDep,
    console: ConsoleDep,
    cursor: Filter = "",
) -> Response:
    """A subject's memories across every status, and the Forget form."""
    try:
        return _subject_page(request, reviewer, console, subject_id, cursor or None)
    except GovernedMemoryError as error:
        return _refused(reviewer, error)


@router.post(f"{PREFIX}/subjects/{{subject_id}}/forget")
def forget(
    request: Request,
    subject_id: str,
    reviewer: ReviewerDep,
    console: ConsoleDep,
    confirm: FormText = "",
    csrf_token: FormText = "",
) -> Response:
    """Forget the subject once its id was retyped; show the receipt."""
    try:
        require_csrf(reviewer, csrf_token)
        if confirm != subject_id:
            raise ValidationError.field("confirm", "retype the subject id exactly to forget it")
        if console.metrics is not None:
            console.metrics.observe_forget_call()
        receipt: ForgetResult = console.service.forget_subject(reviewer.principal, subject_id)
    except GovernedMemoryError as error:
        note("forget", reviewer, type(error).slug)
        if console.metrics is not None and isinstance(error, Conflict):
            console.metrics.observe_conflict(error)
        problem = problem_of(error)
        try:
            return _subject_page(
                request, reviewer, console, subject_id, None, status=problem.status, problem=problem
            )
        except GovernedMemoryError:
            return _refused(reviewer, error)
    note("forget", reviewer, "ok", position=receipt.position, affected=receipt.affected)
    return render("forgotten.html", reviewer=reviewer, receipt=receipt)


def _feed(
    console: ConsoleDep, reviewer: Reviewer, before: int | None, kind: str | None
) -> tuple[list[AuditEvent], int | None, bool]:
    """Up to a page of events below position ``before`` (from the latest if None), newest
    first, of type ``kind`` if given; the position to read older ones below, and whether
    more may follow."""
    shown: list[AuditEvent] = []
    for _ in range(FEED_READS):
        events = console.service.events_before(reviewer.principal, before, FEED_PAGE)
        for event in events:
            before = event.position
            if kind is None or event.type == kind:
                shown.append(event)
                if len(shown) == FEED_PAGE:
                    return shown, before, True
        if len(events) < FEED_PAGE:
            return shown, before, False
    return shown, before, True


@router.get(f"{PREFIX}/audit")
def audit(
    reviewer: ReviewerDep,
    console: ConsoleDep,
    event_type: Annotated[str, Query(alias="type", max_length=64)] = "",
    before: Filter = "",
) -> Response:
    """The tenant's content-free events, newest first, below a position if given,
    optionally of one type."""
    try:
        before = before.strip()
        if before and not (before.isascii() and before.isdigit() and len(before) <= 18):
            raise ValidationError.field("before", "must be a position: a whole number")
        if event_type and event_type not in EVENT_TYPES:
            raise ValidationError.field("type", "is not an event type")
        below = int(before) if before else None
        events, last, more = _feed(console, reviewer, below, event_type or None)
    except GovernedMemoryError as error:
        return _refused(reviewer, error)
    return render(
        "audit.html",
        reviewer=reviewer,
        events=events,
        types=sorted(EVENT_TYPES),
        chosen=event_type,
        before=before,
        next_page=query_string({"type": event_type, "before": str(last)}) if more else None,
    )


__all__ = ["router"]
