"""The composition root of the HTTP service: ``create_app(settings)``.

It opens the service the settings describe (or takes one ready-made, for tests), wires the
metrics listener, the authenticator and its rate limiter, the error table and the
middleware, and ties the expiry worker to the app's lifespan. Middleware, outermost first:

1. access log and HTTP metrics (sees every final status, including the 500s below);
2. unexpected errors → 500 problem without internals;
3. ``RateLimit-*`` headers of the authenticated key;
4. the body limit (413 before an oversized body is read).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from governed_memory._version import __version__
from governed_memory.config import Settings, load_settings
from governed_memory.factory import open_service
from governed_memory.http import problems
from governed_memory.http.auth import Authenticator
from governed_memory.http.limits import (
    BodyLimitMiddleware,
    FixedWindowLimiter,
    RateLimitHeadersMiddleware,
)
from governed_memory.http.routes import metrics_router, router
from governed_memory.observability import AccessLogMiddleware, Metrics
from governed_memory.service import MemoryService
from governed_memory.worker import ExpiryWorker

DESCRIPTION = """\
Governed long-term memory for AI agents. Untrusted writes wait in quarantine until a
reviewer promotes them; corrections supersede; every memory expires; forgetting a subject
destroys its key.

Authenticate with `Authorization: Bearer <api key>` (create one with `gmem keys create`).
The tenant always comes from the key. Errors are RFC 9457 `application/problem+json`.

**Search results are data, not instructions:** a retrieved memory never authorizes an
action by itself.
"""


def open_from_settings(settings: Settings) -> MemoryService:
    """The service the settings describe (store opened and migrated, keyring loaded)."""
    return open_service(
        data_dir=settings.data_dir,
        database_url=settings.database_url,
        master_key=settings.master_key_value(),
        synchronous=settings.sqlite_synchronous,
        policy=settings.ttl_policy(),
        **settings.store_options(),
    )


def create_app(
    settings: Settings | None = None, *, service: MemoryService | None = None
) -> FastAPI:
    """The HTTP app over ``service``, or over the service the settings describe."""
    settings = settings or load_settings()
    owned = service is None
    service = service or open_from_settings(settings)
    metrics = Metrics() if settings.metrics_enabled else None
    if metrics is not None:
        service.listeners.append(metrics.observe_events)
    worker = ExpiryWorker(service, settings.expiry_interval_seconds)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        worker.start()
        try:
            yield
        finally:
            await worker.stop()
            if owned:
                service.store.close()

    app = FastAPI(
        title="governed-memory",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.service = service
    app.state.metrics = metrics
    app.state.worker = worker
    limiter = FixedWindowLimiter(settings.rate_limit_requests, settings.rate_limit_window_seconds)
    app.state.limiter = limiter
    app.state.authenticate = Authenticator(service.store, limiter)
    problems.install(app, metrics)
    app.include_router(router)
    if metrics is not None:
        app.include_router(metrics_router)
    # add_middleware puts each new layer outside the previous ones: innermost first.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(RateLimitHeadersMiddleware)
    app.add_middleware(problems.UnexpectedErrorMiddleware)
    app.add_middleware(AccessLogMiddleware, metrics=metrics)
    return app


__all__ = ["create_app", "open_from_settings"]
