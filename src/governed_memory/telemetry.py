"""OpenTelemetry traces of the service's use cases and store calls (the ``otel`` extra).

Imported only when tracing is on (``GMEM_OTEL=on``, or ``open_service(tracing=True)``), by
the composition root (:mod:`governed_memory.bootstrap`); with tracing off nothing of
OpenTelemetry is imported and the service and store are the plain objects. The HTTP
server span is :mod:`governed_memory.http.tracing`'s.

What a span carries is stated here and nowhere else, and it is never content: the
operation, the tenant, the outcome (``ok`` or the error's problem slug), the store's
backend. Memory ids, subject ids, queries, filters, request and result values stay out
(a store call's arguments are read only for their tenant), and an exception is recorded
as its slug and class name, never its message.

Spans nest: ``POST /v1/search`` (http) → ``gmem.search`` (service) → ``gmem.store.search``
(store). The tracer provider is the process's: with ``GMEM_OTEL_EXPORTER=console`` or
``otlp`` :func:`configure` installs an SDK provider (resource, sampler and batching from
the standard ``OTEL_*`` variables) unless the process already has one; with ``global`` the
embedding application or ``opentelemetry-instrument`` provides it.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import logging
import os
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Literal, TypeVar, cast

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from governed_memory._version import __version__
from governed_memory.errors import ConfigError, GovernedMemoryError, ReadWouldWait
from governed_memory.ports import Store
from governed_memory.service import MemoryService

log = logging.getLogger("governed_memory.telemetry")

Exporter = Literal["otlp", "console", "global"]
#: The distribution ``GMEM_OTEL_EXPORTER=otlp`` needs (part of the ``otel`` extra).
OTLP_DISTRIBUTION = "opentelemetry-exporter-otlp-proto-http"
OTLP_MODULE = "opentelemetry.exporter.otlp.proto.http"

#: The attributes a span may carry; a test holds every exported span to this list.
TENANT = "gmem.tenant"
OPERATION = "gmem.operation"
OUTCOME = "gmem.outcome"
BACKEND = "db.system.name"
ERROR_TYPE = "error.type"
OK = "ok"
#: The outcome of a call asked not to wait that would have: it is made again elsewhere
#: (the HTTP edge's key lookup or search, from a worker thread).
DEFERRED = "deferred"
#: The service name spans carry unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say.
SERVICE = "governed-memory"

#: The use cases traced, those acting for a principal (whose tenant a span names) first.
PRINCIPAL_USE_CASES = (
    "write",
    "promote",
    "reject",
    "forget_subject",
    "erase",
    "get",
    "browse",
    "search",
    "history",
    "list_quarantine",
    "events_after",
    "events_before",
)
SWEEPS = ("expire_due", "apply_retention", "verify_replay")

#: The server span of the HTTP request being served, for the service to name its tenant.
REQUEST_SPAN: ContextVar[Span | None] = ContextVar("gmem_request_span", default=None)

tracer = trace.get_tracer("governed_memory", __version__)
#: The exporter of the provider :func:`configure` installed, if it installed one.
_installed: Exporter | None = None

F = TypeVar("F", bound=Callable[..., Any])


def configure(exporter: Exporter) -> None:
    """Install an SDK tracer provider exporting to ``exporter``, unless the process has
    one already (then it is used as it is, and that is said)."""
    global _installed
    if exporter == "global" or _installed == exporter:
        return
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        log.info("an OpenTelemetry tracer provider is installed already; it is used as is")
        return
    from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes = {SERVICE_VERSION: __version__}
    if not _service_named():
        attributes[SERVICE_NAME] = SERVICE
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter_for(exporter)))
    trace.set_tracer_provider(provider)
    _installed = exporter


def _service_named() -> bool:
    """Whether the standard variables name the service (then that name is kept)."""
    attributes = os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    return bool(os.environ.get("OTEL_SERVICE_NAME")) or "service.name=" in attributes


def exporter_for(kind: Exporter) -> Any:
    """The span exporter of ``GMEM_OTEL_EXPORTER`` (``console`` or ``otlp``)."""
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if _missing(OTLP_MODULE):
        raise ConfigError(
            f"GMEM_OTEL_EXPORTER=otlp needs {OTLP_DISTRIBUTION}, which is not installed: "
            f"pip install {OTLP_DISTRIBUTION}, or set GMEM_OTEL_EXPORTER=console or global"
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found, unused-ignore]
        OTLPSpanExporter,
    )

    return OTLPSpanExporter()  # endpoint, headers…: the standard OTEL_EXPORTER_OTLP_* variables


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:  # a parent package is missing
        return True


def finish(span: Span, error: BaseException | None) -> None:
    """Mark the span's outcome: ``ok``, or the error's slug (its class for a stray error),
    never its message."""
    if error is None:
        span.set_attribute(OUTCOME, OK)
        return
    if isinstance(error, ReadWouldWait):  # not a failure: asked again where it may wait
        span.set_attribute(OUTCOME, DEFERRED)
        return
    slug = error.slug if isinstance(error, GovernedMemoryError) else "error"
    span.set_attribute(OUTCOME, slug)
    span.set_attribute(ERROR_TYPE, type(error).__qualname__)
    span.set_status(Status(StatusCode.ERROR, slug))


def _traced(name: str, method: F, attributes: Callable[..., dict[str, str]]) -> F:
    """``method`` inside a span ``name`` with ``attributes(*args, **kwargs)`` and its
    outcome; exceptions pass through unchanged."""

    @functools.wraps(method)
    def traced(*args: Any, **kwargs: Any) -> Any:
        with tracer.start_as_current_span(
            name,
            attributes=attributes(*args, **kwargs),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                result = method(*args, **kwargs)
            except BaseException as error:
                finish(span, error)
                raise
            finish(span, None)
            return result

    return cast(F, traced)


# -- the service ----------------------------------------------------------------------------


def _use_case_attributes(operation: str) -> Callable[..., dict[str, str]]:
    def attributes(_service: MemoryService, *args: Any, **kwargs: Any) -> dict[str, str]:
        principal = args[0] if args else kwargs.get("principal")
        tenant = getattr(principal, "tenant_id", None)
        if not isinstance(tenant, str):
            return {OPERATION: operation}
        request = REQUEST_SPAN.get()
        if request is not None:
            request.set_attribute(TENANT, tenant)
        return {OPERATION: operation, TENANT: tenant}

    return attributes


def _sweep_attributes(operation: str) -> Callable[..., dict[str, str]]:
    return lambda *_args, **_kwargs: {OPERATION: operation}


class TracedService(MemoryService):
    """A :class:`MemoryService` whose use cases each run in a span ``gmem.<use case>``."""


for _name in PRINCIPAL_USE_CASES + SWEEPS:
    _attributes = (
        _use_case_attributes(_name) if _name in PRINCIPAL_USE_CASES else _sweep_attributes(_name)
    )
    setattr(
        TracedService, _name, _traced(f"gmem.{_name}", getattr(MemoryService, _name), _attributes)
    )


# -- the store ------------------------------------------------------------------------------


_CONTEXTS = frozenset({"snapshot", "prompt"})


def store_operations() -> tuple[str, ...]:
    """The Store port's calls that are traced: every method of its protocols but
    ``snapshot`` and ``prompt`` (contexts, not calls) and those returning an iterator (their work
    happens after the call returns: bulk reads of export and replay)."""
    names: set[str] = set()
    for port in Store.__mro__:
        if port.__module__ != Store.__module__:
            continue
        for name, member in vars(port).items():
            if name.startswith("_") or not callable(member) or name in _CONTEXTS:
                continue
            returns = str(inspect.signature(member).return_annotation)
            if "Iterator" not in returns:
                names.add(name)
    return tuple(sorted(names))


def _tenant_of(value: Any) -> str | None:
    for field in ("tenant_id", "tenant"):
        tenant = getattr(value, field, None)
        if isinstance(tenant, str):
            return tenant
    return None


def _store_attributes(operation: str, method: Callable[..., Any], backend: str) -> Any:
    """What a store call's span says: the call, the backend and its tenant, read from a
    ``tenant_id`` first argument or from the first argument's ``tenant_id``/``tenant``
    (a batch, a search request, a key record); nothing else of the arguments."""
    first = next(iter(inspect.signature(method).parameters), None)
    base = {OPERATION: operation, BACKEND: backend}

    def attributes(*args: Any, **kwargs: Any) -> dict[str, str]:
        value = args[0] if args else kwargs.get(first) if first else None
        tenant = value if first == "tenant_id" and isinstance(value, str) else _tenant_of(value)
        return base if tenant is None else base | {TENANT: tenant}

    return attributes


class TracedStore:
    """A :class:`Store` whose calls each run in a span ``gmem.store.<call>``; everything
    else (``snapshot``, the bulk iterators, a backend's own attributes) is the store's."""

    def __init__(self, store: Store, backend: str) -> None:
        self._store = store
        for name in store_operations():
            method = getattr(store, name)
            attributes = _store_attributes(name, method, backend)
            setattr(self, name, _traced(f"gmem.store.{name}", method, attributes))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def traced_store(store: Store, backend: str) -> Store:
    """``store`` with its calls traced (``backend``: ``sqlite``, ``postgresql``…)."""
    return cast(Store, TracedStore(store, backend))


__all__ = [
    "OPERATION",
    "OUTCOME",
    "REQUEST_SPAN",
    "TENANT",
    "TracedService",
    "configure",
    "exporter_for",
    "finish",
    "store_operations",
    "traced_store",
]
