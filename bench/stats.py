"""Timing helpers: latency percentiles, rates, resident memory."""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable, Sequence
from typing import Any


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def latency_summary(seconds: Sequence[float]) -> dict[str, Any]:
    """p50, p95, p99, mean and max in milliseconds, and the count."""
    ordered = sorted(seconds)
    ms = 1000.0
    return {
        "p50_ms": percentile(ordered, 0.50) * ms,
        "p95_ms": percentile(ordered, 0.95) * ms,
        "p99_ms": percentile(ordered, 0.99) * ms,
        "mean_ms": (sum(ordered) / len(ordered)) * ms if ordered else math.nan,
        "max_ms": ordered[-1] * ms if ordered else math.nan,
        "count": float(len(ordered)),
    }


def timed_calls(call: Callable[[Any], object], arguments: Sequence[Any]) -> list[float]:
    """Call ``call`` once per argument; the duration of each call in seconds."""
    durations = []
    clock = time.perf_counter
    for argument in arguments:
        start = clock()
        call(argument)
        durations.append(clock() - start)
    return durations


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else math.nan


def peak_rss_mib() -> float:
    """The peak resident set size of this process since it was executed.

    ``/proc/self/status`` VmHWM belongs to the address space the process got at
    ``exec``; ``getrusage``'s ``ru_maxrss`` survives ``exec`` and would report the peak
    of the parent that forked it (the benchmark itself, holding the naive store).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mib() -> float:
    """The current resident set size of this process, from /proc."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            pages = int(handle.read().split()[1])
    except OSError:
        return math.nan
    return pages * resource.getpagesize() / (1024 * 1024)
