"""The review console at ``/console/``: server-rendered pages over the same service object
as the API (docs/console.md).

:func:`install` adds its routes, its stylesheet and its sessions to the app. Its modules:
:mod:`.sessions` (server-side sessions), :mod:`.access` (the session cookie, CSRF, the
shared :class:`~.access.Console`), :mod:`.pages` (templates and security headers),
:mod:`.signin`, :mod:`.review` (queue, item page, promote, reject) and :mod:`.subjects`
(subject page, forget, audit feed).
"""

from __future__ import annotations

from datetime import timedelta

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from governed_memory.config import Settings
from governed_memory.http.console import review, signin, subjects
from governed_memory.http.console.access import (
    PREFIX,
    Console,
    SignedOut,
    Throttled,
    on_signed_out,
    on_throttled,
)
from governed_memory.http.console.pages import STATIC
from governed_memory.http.console.sessions import Sessions
from governed_memory.http.limits import FixedWindowLimiter
from governed_memory.observability import Metrics
from governed_memory.ports import Credentials
from governed_memory.service import MemoryService


def install(
    app: FastAPI,
    settings: Settings,
    service: MemoryService,
    api_keys: Credentials,
    limiter: FixedWindowLimiter,
    metrics: Metrics | None,
) -> None:
    """Serve the console on ``app``: its routes, its stylesheet, its sessions (kept in
    ``api_keys``, the store)."""
    idle = timedelta(seconds=settings.console_idle_timeout_seconds)
    sessions = Sessions(api_keys, service.clock, idle)
    app.state.console = Console(service, api_keys, sessions, limiter, metrics)
    app.add_exception_handler(SignedOut, on_signed_out)
    app.add_exception_handler(Throttled, on_throttled)
    app.mount(f"{PREFIX}/static", StaticFiles(directory=STATIC), name="console-static")
    for module in (signin, review, subjects):
        app.include_router(module.router)


__all__ = ["install"]
