"""Content-free structured logs and Prometheus metrics (SPEC §9, rule 10 of §2).

The HTTP edge's own part, the access log, is :mod:`governed_memory.http.access_log`.

Logs are JSON lines. The formatter writes the standard fields (time, level, logger,
message) and the ``extra`` fields the code passes on purpose: ids, versions, types,
statuses, durations. It never formats an exception's message, which could quote input;
it writes the exception's class and the traceback's frames instead.

Metrics live in one :class:`~prometheus_client.CollectorRegistry` per app, so two apps in
one process (tests) never share counters. Under ``gmem serve --workers N`` each worker
writes its samples to the shared ``PROMETHEUS_MULTIPROC_DIR`` (set by the supervising
process before any worker starts), and :meth:`Metrics.exposition` sums every worker's, so
``/metrics`` counts the requests of all the workers whichever one answers it.

Domain counters are fed by :meth:`Metrics.observe_events`, registered as a
``MemoryService`` listener: it sees the events that committed, and only their types, kinds
and statuses become labels.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess

from governed_memory.core.events import (
    Event,
    MemoryContentDestroyed,
    MemoryErased,
    MemoryExpired,
    MemoryPromoted,
    MemoryRejected,
    MemorySuperseded,
    MemoryWritten,
)
from governed_memory.core.values import Status
from governed_memory.errors import Conflict, IdempotencyKeyReused, VersionConflict

ACCESS_LOGGER = "governed_memory.access"
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Attributes every LogRecord has; anything else on a record was passed as ``extra``.
_STANDARD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
# uvicorn's terminal colouring of its own messages: noise in JSON.
_IGNORED_ATTRIBUTES = _STANDARD_ATTRIBUTES | {"color_message"}
# Made once: ``json.dumps`` with options builds an encoder per call (one log line per
# HTTP request). Encoding keeps no state between calls, so threads can share it.
_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: standard fields plus the record's ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _IGNORED_ATTRIBUTES and not name.startswith("_"):
                entry[name] = value
        if record.exc_info and record.exc_info[0] is not None:
            kind, _, tb = record.exc_info
            entry["error_type"] = kind.__name__
            # Frames only, without source lines: the exception's message may quote the
            # input that caused it.
            entry["traceback"] = [
                f"{frame.filename}:{frame.lineno} in {frame.name}"
                for frame in traceback.extract_tb(tb)
            ]
        return _ENCODER.encode(entry)


def configure_logging(level: str = "INFO") -> None:
    """Send every log record to stderr as JSON; uvicorn's loggers included."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True


class Metrics:
    """The counters and histograms of SPEC §9, in a registry of their own."""

    def __init__(self, multiprocess_dir: Path | None = None) -> None:
        self.multiprocess_dir = multiprocess_dir
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.writes = Counter(
            "gmem_writes",
            "Committed writes, by kind and resulting status.",
            ["kind", "status"],
            registry=r,
        )
        self.quarantines = Counter(
            "gmem_quarantines", "Writes that landed in quarantine.", registry=r
        )
        self.promotions = Counter("gmem_promotions", "Items promoted by a reviewer.", registry=r)
        self.rejections = Counter("gmem_rejections", "Items rejected by a reviewer.", registry=r)
        self.conflicts = Counter(
            "gmem_conflicts", "Requests refused with 409, by reason.", ["reason"], registry=r
        )
        self.expirations = Counter("gmem_expirations", "Items whose TTL ran out.", registry=r)
        self.supersessions = Counter(
            "gmem_supersessions", "Items superseded by a correction.", registry=r
        )
        self.forget_calls = Counter("gmem_forget_calls", "Calls to forget a subject.", registry=r)
        self.erasures = Counter("gmem_erasures", "Single memories erased.", registry=r)
        self.contents_destroyed = Counter(
            "gmem_contents_destroyed", "Contents destroyed past their retention window.", registry=r
        )
        self.search_duration = Histogram(
            "gmem_search_duration_seconds", "Time to answer a search.", registry=r
        )
        self.search_items = Histogram(
            "gmem_search_items_returned",
            "Items a search returned.",
            buckets=(0, 1, 2, 5, 10, 20, 50, 100),
            registry=r,
        )
        self.http_requests = Counter(
            "gmem_http_requests",
            "HTTP requests, by method, route template and status.",
            ["method", "route", "status"],
            registry=r,
        )
        self.http_duration = Histogram(
            "gmem_http_request_duration_seconds",
            "HTTP request duration, by method, route template and status.",
            ["method", "route", "status"],
            registry=r,
        )
        # Each request's two series, by their labels: ``labels()`` checks and locks on
        # every call. Known methods, route templates and statuses only, so it stays small.
        self._request_series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def observe_events(self, events: Sequence[Event]) -> None:
        """A ``MemoryService`` listener: count what committed (types and enums only)."""
        for event in events:
            if isinstance(event, MemoryWritten):
                self.writes.labels(event.kind.value, event.status.value).inc()
                if event.status is Status.QUARANTINED:
                    self.quarantines.inc()
            elif isinstance(event, MemoryPromoted):
                self.promotions.inc()
            elif isinstance(event, MemoryRejected):
                self.rejections.inc()
            elif isinstance(event, MemoryExpired):
                self.expirations.inc()
            elif isinstance(event, MemorySuperseded):
                self.supersessions.inc()
            elif isinstance(event, MemoryErased):
                self.erasures.inc()
            elif isinstance(event, MemoryContentDestroyed):
                self.contents_destroyed.inc()

    def observe_conflict(self, error: Conflict) -> None:
        """Count a 409 by the class of conflict."""
        if isinstance(error, VersionConflict):
            reason = "version"
        elif isinstance(error, IdempotencyKeyReused):
            reason = "idempotency_key"
        else:
            reason = "transition"
        self.conflicts.labels(reason).inc()

    def observe_search(self, seconds: float, items: int) -> None:
        """Record one search: how long it took and how many items it returned."""
        self.search_duration.observe(seconds)
        self.search_items.observe(items)

    def observe_forget_call(self) -> None:
        """Count one call to forget a subject, whatever it deleted."""
        self.forget_calls.inc()

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one HTTP request; ``route`` is a template, never a concrete path."""
        series = self._request_series.get((method, route, status))
        if series is None:
            labels = (method, route, str(status))
            series = (self.http_requests.labels(*labels), self.http_duration.labels(*labels))
            self._request_series[(method, route, status)] = series
        requests, duration = series
        requests.inc()
        duration.observe(seconds)

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric (of every worker process)."""
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        summed = CollectorRegistry()
        multiprocess.MultiProcessCollector(summed, str(self.multiprocess_dir))  # type: ignore[no-untyped-call]
        return generate_latest(summed)


__all__ = [
    "ACCESS_LOGGER",
    "PROMETHEUS_CONTENT_TYPE",
    "JsonFormatter",
    "Metrics",
    "configure_logging",
]
