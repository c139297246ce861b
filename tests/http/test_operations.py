"""Health, metrics, access logs, OpenAPI and the expiry worker of the running service."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from governed_memory.observability import ACCESS_LOGGER, JsonFormatter
from governed_memory.service.expiry import RetentionReport
from governed_memory.store.memory import MemoryStore
from governed_memory.worker import ExpiryWorker
from tests.support.api import Api, MakeApi, build_api
from tests.support.fakes import query as search_body
from tests.support.fakes import write_body

T = TypeVar("T")


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in a Prometheus exposition (0 when absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        sample, _, value = line.rpartition(" ")
        metric_name, _, rest = sample.partition("{")
        found = ",".join(sorted(rest.rstrip("}").split(","))) if rest else ""
        if metric_name == name and found == wanted:
            return float(value)
    return 0.0


def eventually(read: Callable[[], T], ready: Callable[[T], bool] = bool, seconds: float = 5) -> T:
    """What ``read`` returns once ``ready`` holds: the access log and request metrics are
    written just after the response is sent, so a fast client can look a moment early."""
    deadline = time.monotonic() + seconds
    value = read()
    while not ready(value) and time.monotonic() < deadline:
        time.sleep(0.01)
        value = read()
    return value


@pytest.mark.parametrize("path", ["/health/live", "/health/ready", "/health"])
def test_health_endpoints_answer_ok_without_a_key(api: Api, path: str) -> None:
    """Health needs no key and answers 200 {"status": "ok"}."""
    response = api.client.get(path)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_metrics_count_the_lifecycle(api: Api, admin: dict[str, str]) -> None:
    """Writes, quarantines, promotions, rejections, supersessions, conflicts and forgets count."""
    reviewer = api.key("memory:review")
    api.write(admin, "a")
    api.write(admin, "b", trust="untrusted")
    api.write(admin, "c", trust="untrusted")
    api.write(admin, "d", supersedes_id="a", content="A correction.")
    api.client.post("/v1/memories/b/promote", json={"expected_version": 1}, headers=reviewer)
    api.client.post("/v1/memories/c/reject", json={"expected_version": 1}, headers=reviewer)
    api.client.put("/v1/memories/a", json=write_body(), headers=admin)  # stale: 409
    api.client.post("/v1/search", json=search_body(), headers=admin)
    api.client.post("/v1/subjects/customer-1/forget", headers=admin)
    text = api.client.get("/metrics").text
    assert metric(text, "gmem_writes_total", kind="fact", status="active") == 2
    assert metric(text, "gmem_writes_total", kind="fact", status="quarantined") == 2
    assert metric(text, "gmem_quarantines_total") == 2
    assert metric(text, "gmem_promotions_total") == 1
    assert metric(text, "gmem_rejections_total") == 1
    assert metric(text, "gmem_supersessions_total") == 1
    assert metric(text, "gmem_conflicts_total", reason="version") == 1
    assert metric(text, "gmem_forget_calls_total") == 1
    assert metric(text, "gmem_search_duration_seconds_count") == 1
    assert metric(text, "gmem_search_items_returned_count") == 1


def test_http_metrics_use_route_templates_not_paths(api: Api, admin: dict[str, str]) -> None:
    """Request metrics are labelled by route template and status; ids never become labels."""
    api.write(admin, "secret-looking-id-123")
    api.client.get("/v1/memories/secret-looking-id-123", headers=admin)
    api.client.get("/v1/no/such/route")
    text = eventually(lambda: api.client.get("/metrics").text, lambda t: "unmatched" in t)
    labels = {"method": "GET", "route": "/v1/memories/{id}", "status": "200"}
    assert metric(text, "gmem_http_requests_total", **labels) == 1
    assert metric(text, "gmem_http_requests_total", method="GET", route="unmatched", status="404")
    assert "secret-looking-id-123" not in text
    assert "/v1/no/such/route" not in text


def test_metrics_can_be_switched_off(make_api: MakeApi) -> None:
    """With GMEM_METRICS_ENABLED false there is no /metrics route."""
    api = make_api(metrics_enabled=False)
    assert api.client.get("/metrics").status_code == 404


def test_access_log_has_route_status_duration_and_key_id(
    api: Api, admin: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """Each request logs method, route template, status, duration and key id; no body."""
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    api.client.put("/v1/memories/pref-1", json=write_body(), headers=admin)
    records = eventually(lambda: [r for r in caplog.records if r.name == ACCESS_LOGGER])
    assert len(records) == 1
    entry = json.loads(JsonFormatter().format(records[0]))
    assert entry["method"] == "PUT"
    assert entry["route"] == "/v1/memories/{id}"
    assert entry["status"] == 201
    assert entry["duration_ms"] >= 0
    assert entry["key_id"] == admin["Authorization"].split("_")[1]
    assert write_body()["content"] not in json.dumps(entry)


def test_the_json_formatter_never_writes_an_exception_message() -> None:
    """A logged exception keeps its class and frames, never its message."""
    try:
        raise ValueError("content: the customer's secret")
    except ValueError:
        record = logging.getLogger("t").makeRecord(
            "t", logging.ERROR, __file__, 1, "failed", None, __import__("sys").exc_info()
        )
    line = JsonFormatter().format(record)
    assert "secret" not in line
    assert json.loads(line)["error_type"] == "ValueError"


def test_openapi_describes_every_endpoint_with_examples(api: Api) -> None:
    """/openapi.json lists every SPEC §8 path, request examples and problem responses."""
    spec = api.client.get("/openapi.json").json()
    expected = {
        ("put", "/v1/memories/{id}"),
        ("post", "/v1/memories"),
        ("get", "/v1/memories"),
        ("get", "/v1/memories/{id}"),
        ("delete", "/v1/memories/{id}"),
        ("get", "/v1/memories/{id}/history"),
        ("post", "/v1/memories/{id}/promote"),
        ("post", "/v1/memories/{id}/reject"),
        ("get", "/v1/quarantine"),
        ("post", "/v1/search"),
        ("post", "/v1/subjects/{subject_id}/forget"),
        ("get", "/v1/events"),
        ("get", "/health/live"),
        ("get", "/health/ready"),
        ("get", "/health"),
        ("get", "/metrics"),
    }
    found = {(method, path) for path, ops in spec["paths"].items() for method in ops}
    assert expected == found
    schemas = spec["components"]["schemas"]
    assert schemas["WriteBody"]["examples"]
    assert schemas["WriteBody"]["additionalProperties"] is False
    put = spec["paths"]["/v1/memories/{id}"]["put"]
    assert {"200", "201", "409", "422"} <= set(put["responses"])
    assert "application/problem+json" in put["responses"]["409"]["content"]
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert api.client.get("/docs").status_code == 200


def test_the_worker_expires_items_on_its_schedule(make_api: MakeApi) -> None:
    """The expiry worker started with the app appends memory.expired when TTLs run out."""
    api = make_api(expiry_interval_seconds=0.05)
    headers = api.key()
    api.write(headers, "note-1", kind="working_note", ttl_seconds=60)
    api.clock.advance(seconds=61)
    deadline = time.monotonic() + 10
    item: dict[str, Any] = {}
    while time.monotonic() < deadline:
        # It reads as expired at once; the worker's memory.expired makes it version 2.
        item = api.client.get("/v1/memories/note-1", headers=headers).json()
        assert item["status"] == "expired"
        if item["version"] == 2:
            break
        time.sleep(0.05)
    assert item["version"] == 2
    assert metric(api.client.get("/metrics").text, "gmem_expirations_total") == 1


class CountingService:
    """A stand-in service whose expiry pass counts its calls and can fail."""

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    def expire_due(self) -> int:
        self.calls += 1
        if self.fail:
            raise RuntimeError("store hiccup")
        return 0

    def apply_retention(self) -> RetentionReport:
        return RetentionReport(0, 0)


def test_the_worker_stops_promptly_and_survives_failures() -> None:
    """The worker keeps running after a failed pass and stops without waiting an interval."""
    service: Any = CountingService(fail=True)

    async def scenario() -> float:
        worker = ExpiryWorker(service, interval=3600)
        worker.start()
        await asyncio.sleep(0.1)
        started = time.monotonic()
        await worker.stop()
        return time.monotonic() - started

    assert asyncio.run(scenario()) < 1
    assert service.calls == 1


class SlowStore(MemoryStore):
    """A memory store whose searches take half a second, and say when one has begun."""

    def __init__(self) -> None:
        super().__init__()
        self.searching = threading.Event()

    def search(self, request: Any) -> Any:
        self.searching.set()
        time.sleep(0.5)
        return super().search(request)


def test_shutdown_lets_in_flight_requests_finish_and_stops_the_worker(tmp_path: Path) -> None:
    """A server told to stop mid-request still answers it, then stops the expiry worker."""
    stack = ExitStack()
    store = SlowStore()
    api = build_api(tmp_path, stack, store)
    headers = api.key()
    answers: list[int] = []

    def slow_search() -> None:
        with httpx.Client(base_url=str(api.client.base_url), timeout=30) as client:
            answers.append(
                client.post("/v1/search", json=search_body(), headers=headers).status_code
            )

    in_flight = threading.Thread(target=slow_search)
    in_flight.start()
    assert store.searching.wait(10)  # the search is now inside the store
    stack.close()  # the server begins its graceful shutdown and waits for it
    in_flight.join(timeout=10)
    assert answers == [200]
    worker = api.app.state.worker
    assert worker.runs >= 1
    assert worker._task is None
