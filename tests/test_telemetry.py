"""OpenTelemetry traces (docs/telemetry.md): a request is one tree of spans — the HTTP
server span, the use case, the store calls — naming tenant, operation and outcome, and
never a memory's content, a query, a subject or a memory id. Off, nothing of
OpenTelemetry is even imported.

The SDK's global tracer provider can be set once per process: these tests install one
with an in-memory exporter (``GMEM_OTEL_EXPORTER=global``: the process's provider), and
run the exporters ``gmem`` installs itself in subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from governed_memory import bootstrap, telemetry
from governed_memory.config import load_settings
from governed_memory.errors import ConfigError
from governed_memory.http.app import create_app
from governed_memory.http.server import running
from governed_memory.http.tracing import TracingMiddleware
from governed_memory.service import MemoryService
from governed_memory.store.sqlite import SQLiteStore
from tests.conftest import postgres_dsn
from tests.support.api import ALL_MEMORY_SCOPES, add_key
from tests.support.fakes import write_body

ROOT = Path(__file__).resolve().parents[1]
EXPORTER = InMemorySpanExporter()

#: What no span may carry: the content written, the words searched, the subject, the id.
CONTENT = "Zanzibar-quokka-7731 prefers the heliotrope invoice template"
QUERY = "heliotrope quokka"
SUBJECT = "customer-vermilion-42"
#: Every attribute a span may carry (telemetry.py and http/tracing.py state them).
ALLOWED = {
    "gmem.tenant",
    "gmem.operation",
    "gmem.outcome",
    "db.system.name",
    "error.type",
    "http.request.method",
    "http.route",
    "http.response.status_code",
}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The in-memory exporter of the process's tracer provider, emptied for the test."""
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[httpx.Client, dict[str, str], Any]]:
    """`gmem serve`'s composition with GMEM_OTEL=on: the app over the service and store
    the settings open, served on a free port; a client, a trusted key's headers, the store."""
    settings = load_settings(
        data_dir=tmp_path, otel="on", otel_exporter="global", sqlite_synchronous="NORMAL"
    )
    with ExitStack() as stack:
        service, store = bootstrap.open_from(settings, warm=False)
        stack.callback(service.close)
        app = create_app(settings, service=service, api_keys=store)
        url = stack.enter_context(running(app))
        client = stack.enter_context(httpx.Client(base_url=url, timeout=30))
        _, token = add_key(store, "acme", ALL_MEMORY_SCOPES, now=datetime.now(UTC))
        yield client, {"Authorization": f"Bearer {token}"}, store


def wait_for(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    """The finished spans once one is named ``name`` (a server span ends just after its
    response is sent)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        finished = list(exporter.get_finished_spans())
        if any(span.name == name for span in finished):
            return finished
        time.sleep(0.01)
    raise AssertionError(f"no span {name}: {[s.name for s in exporter.get_finished_spans()]}")


def one(finished: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [span for span in finished if span.name == name]
    assert len(found) == 1, [span.name for span in finished]
    return found[0]


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def write_and_search(client: httpx.Client, headers: dict[str, str]) -> str:
    """Write a distinctive memory, find it by its words; its id."""
    body = write_body(content=CONTENT, subject_id=SUBJECT)
    written = client.post("/v1/memories", json=body, headers=headers)
    assert written.status_code == 201, written.text
    query = {"agent_id": "support-bot", "purpose": "support", "query": QUERY}
    found = client.post("/v1/search", json=query | {"subject_id": SUBJECT}, headers=headers)
    assert found.status_code == 200, found.text
    assert [hit["content"] for hit in found.json()["items"]] == [CONTENT]
    memory_id: str = written.json()["id"]
    return memory_id


def test_a_search_request_is_one_tree_of_http_use_case_and_store_spans(
    spans: InMemorySpanExporter, served: tuple[httpx.Client, dict[str, str], Any]
) -> None:
    """POST /v1/search makes a server span, the use case's span under it and the store's
    search under that, each naming the tenant, the operation and the outcome."""
    client, headers, _ = served
    write_and_search(client, headers)
    finished = wait_for(spans, "POST /v1/search")
    request = one(finished, "POST /v1/search")
    assert request.kind is SpanKind.SERVER
    assert dict(request.attributes or {}) == {
        "http.request.method": "POST",
        "http.route": "/v1/search",
        "http.response.status_code": 200,
        "gmem.outcome": "ok",
        "gmem.tenant": "acme",
    }
    use_case = one(finished, "gmem.search")
    assert parent_of(use_case) == span_id(request)
    assert use_case.context is not None and request.context is not None
    assert use_case.context.trace_id == request.context.trace_id
    assert dict(use_case.attributes or {}) == {
        "gmem.operation": "search",
        "gmem.tenant": "acme",
        "gmem.outcome": "ok",
    }
    store_search = one(finished, "gmem.store.search")
    assert parent_of(store_search) == span_id(use_case)
    assert dict(store_search.attributes or {}) == {
        "gmem.operation": "search",
        "db.system.name": "sqlite",
        "gmem.tenant": "acme",
        "gmem.outcome": "ok",
    }
    write = one(finished, "gmem.write")
    assert "gmem.store.commit" in {
        span.name for span in finished if parent_of(span) == span_id(write)
    }


def test_no_span_carries_content_a_query_a_subject_or_a_memory_id(
    spans: InMemorySpanExporter, served: tuple[httpx.Client, dict[str, str], Any]
) -> None:
    """Write a distinctive memory, search for it, read it, fail to rewrite it: no exported
    span — name, attributes, events, links, status, resource — holds any of its words,
    the subject or the id, and every attribute is one of the listed ones."""
    client, headers, _ = served
    memory_id = write_and_search(client, headers)
    assert client.get(f"/v1/memories/{memory_id}", headers=headers).status_code == 200
    listed = client.get(f"/v1/memories?subject_id={SUBJECT}", headers=headers)
    assert listed.status_code == 200
    stale = write_body(content=CONTENT + " again", subject_id=SUBJECT, expected_version=0)
    conflict = client.put(f"/v1/memories/{memory_id}", json=stale, headers=headers)
    assert conflict.status_code == 409
    finished = wait_for(spans, "PUT /v1/memories/{id}")
    assert len(finished) > 10
    secrets_ = [*CONTENT.split(), *QUERY.split(), SUBJECT, memory_id]
    for span in finished:
        text = span.to_json()
        leaked = [word for word in secrets_ if word in text]
        assert not leaked, f"{span.name} carries {leaked}"
        assert set(span.attributes or {}) <= ALLOWED, span.name
        assert not span.events, span.name


def test_a_refused_use_case_says_its_problem_never_its_message(
    spans: InMemorySpanExporter, served: tuple[httpx.Client, dict[str, str], Any]
) -> None:
    """A stale rewrite: the use case's span ends in error with the problem's slug as its
    outcome, no exception event; the request's span is 409, refused."""
    client, headers, _ = served
    memory_id = write_and_search(client, headers)
    stale = write_body(content=CONTENT, subject_id=SUBJECT, expected_version=0)
    assert client.put(f"/v1/memories/{memory_id}", json=stale, headers=headers).status_code == 409
    finished = wait_for(spans, "PUT /v1/memories/{id}")
    writes = [span for span in finished if span.name == "gmem.write"]
    refused = writes[-1]
    assert refused.attributes is not None
    assert refused.attributes["gmem.outcome"] == "version-conflict"
    assert refused.attributes["error.type"] == "VersionConflict"
    assert refused.status.status_code is StatusCode.ERROR
    assert refused.status.description == "version-conflict"
    assert not refused.events
    request = one(finished, "PUT /v1/memories/{id}")
    assert request.attributes is not None
    assert request.attributes["http.response.status_code"] == 409
    assert request.attributes["gmem.outcome"] == "refused"


def test_a_request_joins_the_trace_its_caller_sends(
    spans: InMemorySpanExporter, served: tuple[httpx.Client, dict[str, str], Any]
) -> None:
    """A W3C traceparent header makes the server span a child of the caller's span."""
    client, headers, _ = served
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    traced = headers | {"traceparent": f"00-{trace_id}-{parent}-01"}
    assert client.get("/v1/memories", headers=traced).status_code == 200
    request = one(wait_for(spans, "GET /v1/memories"), "GET /v1/memories")
    assert request.context is not None
    assert f"{request.context.trace_id:032x}" == trace_id
    assert f"{parent_of(request):016x}" == parent


def test_an_unauthenticated_request_is_traced_without_a_tenant(
    spans: InMemorySpanExporter, served: tuple[httpx.Client, dict[str, str], Any]
) -> None:
    """A request refused before any use case: its server span alone, 401, no tenant."""
    client, _, _ = served
    assert client.post("/v1/search", json={"query": QUERY}).status_code == 401
    finished = wait_for(spans, "POST /v1/search")
    request = one(finished, "POST /v1/search")
    assert request.attributes is not None
    assert "gmem.tenant" not in request.attributes
    assert request.attributes["gmem.outcome"] == "refused"
    assert not any(span.name == "gmem.search" for span in finished)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_traced_library_service_traces_use_cases_and_store_calls_on_each_backend(
    backend: str, spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    """open_service(tracing=True): the sweeps name no tenant; the store spans name the
    backend; the service is still a MemoryService."""
    options: dict[str, Any] = {}
    if backend == "postgres":
        options = {
            "database_url": postgres_dsn(),
            "master_key": "A" * 43 + "=",
            "schema": "gmem_test_" + uuid.uuid4().hex[:12],
        }
    service = bootstrap.open_service(data_dir=tmp_path, tracing=True, **options)
    try:
        assert isinstance(service, MemoryService)
        service.expire_due()
    finally:
        if backend == "postgres":
            service.store.drop_schema()  # type: ignore[attr-defined]
        service.close()
    finished = list(spans.get_finished_spans())
    sweep = one(finished, "gmem.expire_due")
    assert dict(sweep.attributes or {}) == {"gmem.operation": "expire_due", "gmem.outcome": "ok"}
    due = one(finished, "gmem.store.due_for_expiry")
    assert parent_of(due) == span_id(sweep)
    expected = "sqlite" if backend == "sqlite" else "postgresql"
    assert due.attributes is not None and due.attributes["db.system.name"] == expected


def test_with_tracing_off_the_app_is_the_plain_one_and_loads_no_tracing_module(
    tmp_path: Path,
) -> None:
    """The default, in a fresh interpreter: the app serves through the plain service and
    store, with no tracing middleware; neither the OpenTelemetry SDK nor our tracing
    modules are loaded (FastAPI itself imports the OpenTelemetry API, a dependency of
    its own); the Python client loads nothing of OpenTelemetry at all."""
    script = f"""
import sys
import governed_memory.client
assert not [m for m in sys.modules if m.startswith("opentelemetry")], "the client"
from fastapi.testclient import TestClient
from governed_memory.config import load_settings
from governed_memory.http.app import create_app
from governed_memory.service import MemoryService
from governed_memory.store.sqlite import SQLiteStore

app = create_app(load_settings(data_dir={str(tmp_path)!r}))
with TestClient(app) as client:
    assert client.get("/health").status_code == 200
assert type(app.state.service) is MemoryService, type(app.state.service)
assert type(app.state.api_keys) is SQLiteStore, type(app.state.api_keys)
assert all("Tracing" not in m.cls.__name__ for m in app.user_middleware)
ours = {{"governed_memory.telemetry", "governed_memory.http.tracing"}} & set(sys.modules)
assert not ours, ours
sdk = sorted(name for name in sys.modules if name.startswith("opentelemetry.sdk"))
assert not sdk, sdk
print("plain")
"""
    env = os.environ | {"PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT)}
    env = {k: v for k, v in env.items() if not k.startswith("GMEM_") or k.startswith("GMEM_TEST")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "plain"


def test_with_tracing_off_a_host_s_tracer_provider_gets_no_span_from_the_app(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    """An application embedding the service has its own tracer provider: with GMEM_OTEL
    off, serving requests adds no span to it (FastAPI's own telemetry, which would name
    the concrete path and query, is off too)."""
    settings = load_settings(data_dir=tmp_path, sqlite_synchronous="NORMAL")
    with ExitStack() as stack:
        service, store = bootstrap.open_from(settings, warm=False)
        stack.callback(service.close)
        url = stack.enter_context(running(create_app(settings, service=service, api_keys=store)))
        client = stack.enter_context(httpx.Client(base_url=url, timeout=30))
        _, token = add_key(store, "acme", ALL_MEMORY_SCOPES, now=datetime.now(UTC))
        headers = {"Authorization": f"Bearer {token}"}
        memory_id = write_and_search(client, headers)
        assert client.get(f"/v1/memories/{memory_id}", headers=headers).status_code == 200
        listed = client.get(f"/v1/memories?subject_id={SUBJECT}", headers=headers)
        assert listed.status_code == 200
    assert [span.name for span in spans.get_finished_spans()] == []


def test_tracing_on_adds_the_middleware_and_wraps_the_service_and_store(tmp_path: Path) -> None:
    """GMEM_OTEL=on: the app's outermost middleware is the tracing one, the service is the
    traced one and the API keys' store is the traced store."""
    settings = load_settings(data_dir=tmp_path, otel="on", otel_exporter="global")
    app = create_app(settings)
    try:
        assert app.user_middleware[0].cls is TracingMiddleware
        assert isinstance(app.state.service, telemetry.TracedService)
        assert isinstance(app.state.api_keys, telemetry.TracedStore)
        assert isinstance(app.state.service.store, telemetry.TracedStore)
        assert not isinstance(app.state.service.store, SQLiteStore)
    finally:
        app.state.service.close()


def test_gmem_otel_on_without_the_extra_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without the otel extra, GMEM_OTEL=on stops start-up and names the fix."""
    import governed_memory.config as config

    monkeypatch.setattr(config, "OTEL_EXTRA", {"opentelemetry_absent": "opentelemetry-sdk"})
    with pytest.raises(ConfigError) as refused:
        load_settings(data_dir=tmp_path, otel="on")
    assert str(refused.value) == (
        "GMEM_OTEL=on needs the otel extra, and opentelemetry-sdk is not installed: "
        "pip install 'governed-memory[otel]'"
    )
    assert load_settings(data_dir=tmp_path).otel == "off"


def test_an_unknown_exporter_is_refused_by_name(tmp_path: Path) -> None:
    """GMEM_OTEL_EXPORTER takes otlp, console or global."""
    with pytest.raises(ConfigError, match=r"^GMEM_OTEL_EXPORTER: Input should be 'otlp'"):
        load_settings(data_dir=tmp_path, otel="on", otel_exporter="jaeger")


def test_the_otlp_exporter_without_its_package_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GMEM_OTEL_EXPORTER=otlp needs the OTLP exporter's distribution, and says which."""
    monkeypatch.setattr(telemetry, "OTLP_MODULE", "opentelemetry_absent.otlp")
    with pytest.raises(ConfigError, match="needs opentelemetry-exporter-otlp-proto-http"):
        telemetry.exporter_for("otlp")


def test_the_otlp_exporter_comes_with_the_extra() -> None:
    """The default exporter needs nothing beyond `governed-memory[otel]`."""
    exporter = telemetry.exporter_for("otlp")
    assert type(exporter).__name__ == "OTLPSpanExporter"
    exporter.shutdown()


def console_spans(printed: str) -> list[dict[str, Any]]:
    """The JSON objects of the console exporter among the lines ``gmem demo`` prints."""
    decoder, found, at = json.JSONDecoder(), [], printed.find("{")
    while at != -1:
        value, end = decoder.raw_decode(printed, at)
        found.append(value)
        at = printed.find("{", end)
    return found


@pytest.mark.slow
def test_the_console_exporter_prints_the_demo_s_spans_without_its_content() -> None:
    """docs/telemetry.md's example: `GMEM_OTEL=on GMEM_OTEL_EXPORTER=console gmem demo`
    prints the walkthrough and, as JSON, a span per request, use case and store call,
    none with the demo's memories or its query."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GMEM_")}
    env |= {"GMEM_OTEL": "on", "GMEM_OTEL_EXPORTER": "console", "OTEL_SERVICE_NAME": "gmem-docs"}
    env["PYTHONPATH"] = str(ROOT / "src")
    done = subprocess.run(
        [sys.executable, "-m", "governed_memory.cli", "demo"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "8. health             -> 200" in done.stdout
    printed = console_spans(done.stdout)
    names = {span["name"] for span in printed}
    assert {"POST /v1/search", "gmem.search", "gmem.store.search", "gmem.store.commit"} <= names
    assert {span["resource"]["attributes"]["service.name"] for span in printed} == {"gmem-docs"}
    for word in ("Prefers", "email", "weekdays", "phone", "customer-"):
        assert all(word not in json.dumps(span) for span in printed), word
