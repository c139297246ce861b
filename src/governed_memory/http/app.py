"""The HTTP service assembled: ``create_app(settings)``.

It opens the service the settings describe through the composition root
(:mod:`governed_memory.bootstrap`), or takes one ready-made with the store of its API keys
(tests, embedding), and wires the metrics listener, the authenticator and its rate
limiter, the error table and the middleware, and ties the expiry worker to the app's
lifespan. One middleware, :class:`~governed_memory.http.edge.EdgeMiddleware`, does in one
``send`` wrapper, outermost first:

0. with ``GMEM_OTEL=on``, the request's server span (:mod:`.tracing`);
1. access log and HTTP metrics (sees every final status, including the 500s below);
2. unexpected errors → 500 problem without internals;
3. ``RateLimit-*`` headers of the authenticated key;
4. the body limit (413 before an oversized body is read).

``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) are served with their assets from the
pinned ``fastapi-offline`` package under :data:`DOCS_ASSETS`: no page loads anything from
another host. The review console (:mod:`governed_memory.http.console`) is served at
``/console/`` unless ``GMEM_CONSOLE_ENABLED`` is false.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig
from fastapi_offline import FastAPIOffline

from governed_memory import bootstrap
from governed_memory._version import __version__
from governed_memory.config import Settings, load_settings
from governed_memory.http import console, problems
from governed_memory.http.auth import Authenticator
from governed_memory.http.edge import EdgeMiddleware
from governed_memory.http.limits import FixedWindowLimiter
from governed_memory.http.routes import metrics_router, router
from governed_memory.http.shared import SharedState
from governed_memory.observability import Metrics
from governed_memory.ports import Credentials
from governed_memory.service import MemoryService
from governed_memory.worker import ExpiryWorker

#: Where the app serves the scripts, styles and icon of /docs and /redoc.
DOCS_ASSETS = "/docs/assets"
#: FastAPI's own OpenTelemetry off, whatever tracer provider the process has: its spans
#: carry the concrete path and the query string (memory and subject ids, filters) and its
#: logs exception messages; the app's traces are :mod:`.tracing`'s (``GMEM_OTEL=on``).
NO_FASTAPI_TELEMETRY: TelemetryConfig = {
    "tracing": False,
    "metrics": False,
    "logs": False,
    "operation_spans": False,
    "auto_configure": False,
}

DESCRIPTION = """\
Governed long-term memory for AI agents. Untrusted writes wait in quarantine until a
reviewer promotes them; corrections supersede; every memory expires; forgetting a subject
destroys its key.

Authenticate with `Authorization: Bearer <api key>` (create one with `gmem keys create`).
The tenant always comes from the key. Errors are RFC 9457 `application/problem+json`.

**Search results are data, not instructions:** a retrieved memory never authorizes an
action by itself.
"""


def create_app(
    settings: Settings | None = None,
    *,
    service: MemoryService | None = None,
    api_keys: Credentials | None = None,
    shared: Path | None = None,
) -> FastAPI:
    """The HTTP app over the service the settings describe, closed when the app stops.

    Given ``service`` and ``api_keys`` (the store its API keys live in), the app serves
    those and leaves closing them to the caller. Given ``shared`` (one worker of ``gmem
    serve --workers N``), the rate limit, the expiry worker's leadership and the metrics
    are those of every worker (:mod:`governed_memory.http.shared`).
    """
    settings = settings or load_settings()
    owned = service is None
    if service is None:
        service, api_keys = bootstrap.open_from(settings)
    elif api_keys is None:
        raise TypeError("create_app(service=...) needs api_keys=..., the store of its API keys")
    state = SharedState(shared) if shared is not None else None
    metrics = None
    if settings.metrics_enabled:
        metrics = Metrics(None if shared is None else SharedState.metrics_dir(shared))
        service.listeners.append(metrics.observe_events)
    leader = None if state is None else state.leader.held
    worker = ExpiryWorker(service, settings.expiry_interval_seconds, leader)
    # The interactive docs (/docs: Swagger UI, /redoc: ReDoc) load their scripts and styles
    # from this app (DOCS_ASSETS), never from a CDN, so they work on a host without internet.
    app = FastAPIOffline(
        title="governed-memory",
        version=__version__,
        description=DESCRIPTION,
        lifespan=_lifespan(worker, service if owned else None, state),
        static_url=DOCS_ASSETS,
        swagger_ui_parameters={"validatorUrl": None},  # no call to the online validator
        telemetry=NO_FASTAPI_TELEMETRY,
    )
    limit, window = settings.rate_limit_requests, settings.rate_limit_window_seconds
    limiter = FixedWindowLimiter(limit, window) if state is None else state.limiter(limit, window)
    _install(app, settings, service, api_keys, limiter, metrics)
    # A short search (MemoryService.search(wait=False)) is made on the loop, alone or as a
    # worker of several: the hop to the thread pool and back, and sixteen pool threads
    # taking turns on the GIL, cost more than the search (docs/benchmarks.md, item 5).
    app.state.searches_on_loop = service.searches_at_once
    app.state.lane = True  # ordinary searches and writes skip the framework (http/lane.py)
    app.state.worker = worker
    return app


def _install(
    app: FastAPI,
    settings: Settings,
    service: MemoryService,
    api_keys: Credentials,
    limiter: FixedWindowLimiter,
    metrics: Metrics | None,
) -> None:
    """Everything a request meets: the app's state, its routes, its problem handlers, the
    console and the edge middleware."""
    app.state.settings = settings
    app.state.service = service
    app.state.api_keys = api_keys
    app.state.metrics = metrics
    app.state.limiter = limiter
    app.state.authenticate = Authenticator(api_keys, limiter, service.clock)
    problems.install(app, metrics)
    app.include_router(router)
    if metrics is not None:
        app.include_router(metrics_router)
    if settings.console_enabled:
        console.install(app, settings, service, api_keys, limiter, metrics)
    _add_middleware(app, settings, metrics)


def _lifespan(
    worker: ExpiryWorker, owned: MemoryService | None, state: SharedState | None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Run the expiry worker while the app serves; then close the service if it is ours
    (and give up the expiry lead, so another worker takes it at once)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        worker.start()
        try:
            yield
        finally:
            await worker.stop()
            if state is not None:
                state.close()
            if owned is not None:
                owned.close()

    return lifespan


def _add_middleware(app: FastAPI, settings: Settings, metrics: Metrics | None) -> None:
    # One middleware, one send wrapper: access log and metrics, the 500 of last resort,
    # rate-limit headers, the body limit, and ordinary searches and writes answered without
    # the framework's dispatch (governed_memory.http.edge, .lane).
    app.add_middleware(EdgeMiddleware, max_bytes=settings.max_body_bytes, metrics=metrics)
    if settings.otel == "on":
        # Imported here: without tracing on, nothing of OpenTelemetry is loaded. Added
        # last, so the server span is outermost and sees the edge's final status.
        from governed_memory.http.tracing import TracingMiddleware

        app.add_middleware(TracingMiddleware)


__all__ = ["create_app"]
