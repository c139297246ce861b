"""The routes of SPEC §8. Each one parses, calls the service, serializes; nothing else.

Routes are plain ``def`` functions: FastAPI runs them in its thread pool, which suits the
synchronous stores (SQLite keeps one connection per thread). Search is the exception
(``app.state.searches_on_loop``): it is first asked on the event loop, where the service
makes it only if it is short and waits for nothing (a small SQLite scope), and from the
thread pool otherwise. Scopes, agents, trust and tenant
visibility are enforced by the service; the principal comes from the API key.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal, NamedTuple

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request
from fastapi.security import HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from governed_memory.core.model import MemoryItem, Principal
from governed_memory.core.values import IDEMPOTENCY_KEY_PATTERN, KindName, StatusName, anchored
from governed_memory.errors import ReadWouldWait
from governed_memory.http import schemas
from governed_memory.http.problems import PROBLEM_JSON
from governed_memory.http.strict import StrictRoute
from governed_memory.observability import PROMETHEUS_CONTENT_TYPE, Metrics
from governed_memory.service import MemoryService


class Caller(NamedTuple):
    """Who calls (the principal of the request's API key), the service and metrics the
    route calls on, and whether a search is first asked on the event loop."""

    principal: Principal
    service: MemoryService
    metrics: Metrics | None
    searches_on_loop: bool = False


class ApiKeyBearer(HTTPBearer):
    """The caller of an authenticated route, as one dependency.

    Being an ``HTTPBearer``, it declares the Bearer scheme in OpenAPI (the "Authorize"
    button of /docs); the authenticator reads the header itself, so a missing one is our
    401, not FastAPI's 403. One dependency gives the principal, the service and the
    metrics because FastAPI solves every dependency on every request: four of them (the
    scheme, the principal, the service, the metrics) cost about 0.15 ms a request more
    than this one.
    """

    # The parent returns the header's credentials; this returns the authenticated caller
    # (FastAPI reads the return type only from the route's annotation, ``CallerDep``).
    async def __call__(self, request: Request) -> Caller:  # type: ignore[override]
        state = request.app.state
        principal: Principal = await state.authenticate(request)
        return Caller(principal, state.service, state.metrics, state.searches_on_loop)


# The dependencies are ``async`` so FastAPI calls them on the event loop: a sync
# dependency costs a thread-pool hop per request, more than the work it does.
async def _service(request: Request) -> MemoryService:
    service: MemoryService = request.app.state.service
    return service


async def _metrics(request: Request) -> Metrics | None:
    metrics: Metrics | None = request.app.state.metrics
    return metrics


CallerDep = Annotated[
    Caller,
    Depends(
        ApiKeyBearer(
            scheme_name="HTTPBearer",
            auto_error=False,
            description="An API key from `gmem keys create`.",
        )
    ),
]
ServiceDep = Annotated[MemoryService, Depends(_service)]
MetricsDep = Annotated[Metrics | None, Depends(_metrics)]
MemoryIdPath = Annotated[str, Path(alias="id", pattern=schemas.ID, description="The memory id.")]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=anchored(IDEMPOTENCY_KEY_PATTERN),
        description="Retries with the same key return the first result (1..255 visible "
        "ASCII characters).",
    ),
]


def _problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    described = {
        400: "Malformed JSON",
        401: "Missing, unknown, revoked or expired API key",
        403: "Scope, agent or trust not allowed; self-review or self-erase",
        404: "Unknown item, or another tenant's or agent's",
        409: "Version conflict (with current_version), not quarantined, idempotency key "
        "reuse, a memory that cannot be erased alone",
        413: "Body over the limit",
        422: "Validation failed; errors lists every bad field",
        429: "Rate limited; see Retry-After",
        503: "The store is unreachable",
    }
    return {
        status: {
            "model": schemas.Problem,
            "description": described[status],
            "content": {PROBLEM_JSON: {}},
        }
        for status in statuses
    }


AUTHED = (401, 403, 422, 429)
WRITE = _problems(400, *AUTHED, 404, 409, 413)
READ = _problems(*AUTHED, 404)


def _item(item: MemoryItem, status: int = 200, **headers: str) -> JSONResponse:
    return JSONResponse(
        item.to_dict(), status_code=status, headers={"ETag": f'"{item.version}"', **headers}
    )


# A request is matched against the routes one by one, in the order they are defined here,
# each match costing a few microseconds (twice over, through the app's include): writes
# and searches, the calls agents make most, come first.
router = APIRouter(route_class=StrictRoute)


@router.put(
    "/v1/memories/{id}",
    status_code=201,
    response_model=schemas.MemoryItemOut,
    responses={200: {"model": schemas.MemoryItemOut, "description": "Replaced"}, **WRITE},
    summary="Create (expected_version 0) or replace a memory",
    tags=["memories"],
)
def put_memory(
    memory_id: MemoryIdPath,
    body: schemas.WriteBody,
    caller: CallerDep,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    raw = body.model_dump(exclude_none=True) | {"id": memory_id}
    result = caller.service.write(caller.principal, raw, idempotency_key=idempotency_key)
    return _item(result.item, 201 if result.created else 200)


@router.post(
    "/v1/search",
    response_model=schemas.SearchResultOut,
    responses=_problems(400, *AUTHED, 413),
    summary="Search one agent's memories for one purpose (results are data, not orders)",
    tags=["memories"],
)
async def search(body: schemas.SearchBody, caller: CallerDep) -> Response:
    return await answer_search(caller, body, time.perf_counter())


async def answer_search(caller: Caller, body: schemas.SearchBody, started: float) -> Response:
    """The answer to a search (the route's, by the framework or :mod:`.lane`), timed from
    ``started``."""
    raw = body.model_dump(exclude_none=True)
    if caller.searches_on_loop:
        try:  # on the event loop, if the service can answer at once (MemoryService.search)
            return _searched(caller, raw, started, wait=False)
        except ReadWouldWait:  # long, or it would wait: from a worker thread
            pass
    return await run_in_threadpool(_searched, caller, raw, started)


def _searched(caller: Caller, raw: dict[str, Any], started: float, wait: bool = True) -> Response:
    """The search's answer, timed from ``started`` (here because no committed event shows
    a search: see MemoryService.listeners)."""
    result = caller.service.search(caller.principal, raw, wait=wait)
    if caller.metrics is not None:
        caller.metrics.observe_search(time.perf_counter() - started, len(result.items))
    return JSONResponse(result.to_dict())


@router.post(
    "/v1/memories",
    status_code=201,
    response_model=schemas.MemoryItemOut,
    responses=WRITE,
    summary="Create a memory with a server-generated id",
    tags=["memories"],
)
def post_memory(
    body: schemas.CreateBody,
    caller: CallerDep,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    result = caller.service.write(
        caller.principal, body.model_dump(exclude_none=True), idempotency_key=idempotency_key
    )
    item = result.item
    return _item(item, 201, Location=f"/v1/memories/{item.id}")


@router.get(
    "/v1/memories/{id}",
    response_model=schemas.MemoryItemOut,
    responses=READ,
    summary="Read a memory (content null once deleted)",
    tags=["memories"],
)
def get_memory(memory_id: MemoryIdPath, caller: CallerDep) -> Response:
    return _item(caller.service.get(caller.principal, memory_id))


@router.delete(
    "/v1/memories/{id}",
    response_model=schemas.EraseOut,
    responses=_problems(*AUTHED, 404, 409),
    summary="Erase one memory: deleted, the content of every version destroyed",
    tags=["memories"],
)
def erase_memory(
    memory_id: MemoryIdPath,
    caller: CallerDep,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Needs `subject:forget`; never erases what the caller's own principal wrote (403).
    Erasing a deleted memory changes nothing and answers with the event that deleted it;
    a memory written before memories had keys of their own cannot be erased alone (409:
    forget its subject)."""
    result = caller.service.erase(caller.principal, memory_id, idempotency_key=idempotency_key)
    return JSONResponse(result.to_dict())


@router.get(
    "/v1/memories",
    response_model=schemas.MemoriesOut,
    responses=_problems(*AUTHED),
    summary="Browse memories without a query, in (updated_at, id) order",
    tags=["memories"],
)
def list_memories(
    caller: CallerDep,
    agent_id: Annotated[str | None, Query(pattern=schemas.AGENT)] = None,
    purpose: Annotated[str | None, Query(pattern=schemas.PURPOSE)] = None,
    subject_id: Annotated[str | None, Query(pattern=schemas.AGENT)] = None,
    status: Annotated[
        StatusName | None,
        Query(description="As of now: a live memory past its expiry is `expired`."),
    ] = None,
    kind: KindName | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    order: Annotated[
        Literal["oldest", "newest"] | None,
        Query(description="`oldest` change first (the default) or `newest`."),
    ] = None,
) -> Response:
    """Only the agents the key may act for; a memory that changes while you page moves to
    the end of the order (seen again, never missed)."""
    page = caller.service.browse(
        caller.principal,
        agent_id=agent_id,
        purpose=purpose,
        subject_id=subject_id,
        status=status,
        kind=kind,
        limit=limit,
        cursor=cursor,
        order=order,
    )
    return JSONResponse(page.to_dict())


@router.get(
    "/v1/memories/{id}/history",
    response_model=schemas.HistoryOut,
    responses=READ,
    summary="Every event that changed a memory; no content but rejection reasons",
    tags=["audit"],
)
def get_history(memory_id: MemoryIdPath, caller: CallerDep) -> Response:
    events = caller.service.history(caller.principal, memory_id)
    return JSONResponse({"events": [event.to_history_dict() for event in events]})


@router.post(
    "/v1/memories/{id}/promote",
    response_model=schemas.MemoryItemOut,
    responses=WRITE,
    summary="Promote a quarantined memory (active, verified); never your own",
    tags=["review"],
)
def promote(
    memory_id: MemoryIdPath,
    body: schemas.PromoteBody,
    caller: CallerDep,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    item = caller.service.promote(
        caller.principal, memory_id, body.expected_version, idempotency_key=idempotency_key
    )
    return _item(item)


@router.post(
    "/v1/memories/{id}/reject",
    response_model=schemas.MemoryItemOut,
    responses=WRITE,
    summary="Reject a quarantined memory",
    tags=["review"],
)
def reject(
    memory_id: MemoryIdPath,
    body: schemas.RejectBody,
    caller: CallerDep,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    item = caller.service.reject(
        caller.principal,
        memory_id,
        body.expected_version,
        body.reason,
        idempotency_key=idempotency_key,
    )
    return _item(item)


@router.get(
    "/v1/quarantine",
    response_model=schemas.QuarantineOut,
    responses=READ,
    summary="The review queue, oldest first",
    tags=["review"],
)
def list_quarantine(
    caller: CallerDep,
    agent_id: Annotated[str | None, Query(pattern=schemas.AGENT)] = None,
    purpose: Annotated[str | None, Query(pattern=schemas.PURPOSE)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> Response:
    page = caller.service.list_quarantine(
        caller.principal, agent_id=agent_id, purpose=purpose, limit=limit, cursor=cursor
    )
    return JSONResponse(page.to_dict())


@router.post(
    "/v1/subjects/{subject_id}/forget",
    response_model=schemas.ForgetOut,
    responses=_problems(400, *AUTHED, 409, 413),
    summary="Delete every memory of a subject and destroy its key (crypto-shredding)",
    tags=["subjects"],
)
def forget(
    subject_id: Annotated[str, Path(pattern=schemas.AGENT)],
    caller: CallerDep,
    body: Annotated[schemas.ForgetBody | None, Body()] = None,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    # Counted here: a call that forgets nothing, or fails, commits no event to count.
    if caller.metrics is not None:
        caller.metrics.observe_forget_call()
    result = caller.service.forget_subject(
        caller.principal, subject_id, idempotency_key=idempotency_key
    )
    return JSONResponse(result.to_dict())


@router.get(
    "/v1/events",
    response_model=schemas.EventsOut,
    responses=_problems(*AUTHED),
    summary="The tenant's content-free audit feed, after a position",
    tags=["audit"],
)
def events(
    caller: CallerDep,
    after: Annotated[int, Query(ge=0, le=schemas.MAX_JSON_INT)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    page = caller.service.events_after(caller.principal, after, limit)
    next_after = page[-1].position if page else after
    return JSONResponse({"events": [e.to_dict() for e in page], "next_after": next_after})


OK = {"status": "ok"}


@router.get("/health/live", response_model=schemas.HealthOut, tags=["operations"])
def live() -> Response:
    """The process is up."""
    return JSONResponse(OK)


@router.get(
    "/health/ready", response_model=schemas.HealthOut, responses=_problems(503), tags=["operations"]
)
def ready(service: ServiceDep) -> Response:
    """The store answers; 503 when it does not."""
    service.ping()
    return JSONResponse(OK)


@router.get(
    "/health", response_model=schemas.HealthOut, responses=_problems(503), tags=["operations"]
)
def health(service: ServiceDep) -> Response:
    """Live and ready."""
    return ready(service)


metrics_router = APIRouter()


@metrics_router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {PROMETHEUS_CONTENT_TYPE: {}}}},
    tags=["operations"],
)
def metrics(registry: MetricsDep) -> Response:
    """Prometheus text format (the route exists only when GMEM_METRICS_ENABLED is true)."""
    assert registry is not None
    return Response(registry.exposition(), media_type=PROMETHEUS_CONTENT_TYPE)


__all__ = ["Caller", "answer_search", "metrics_router", "router"]
