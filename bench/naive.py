"""The naive baseline of SPEC §12: the reference design, ported faithfully.

The reference kept its projection in a dict behind one lock, appended one JSON line per
write to a log file (opened in append mode for each write and closed again, which hands
the line to the OS page cache but does not ``fsync``: a power loss could drop
acknowledged writes), and searched by scanning every item: hard filters first (tenant,
agent, purpose, active, not expired), then ``term matches × 10 + confidence + recency``.

Because that reference is not durable, the benchmark also measures the same design with
``flush`` + ``os.fsync`` per append (``durable=True``), the fair baseline for durable
writes. Recency uses the service's curve (1 for now, ½ after 30 days), so the two rank
on comparable terms; items that match no query term are dropped, as the service does.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_WORD = re.compile(r"\w+")
DAY = 86_400.0
RECENCY_HALF_LIFE_DAYS = 30.0
TTL_SECONDS = {"fact": 90 * DAY, "preference": 180 * DAY, "skill": 365 * DAY, "working_note": DAY}


@dataclass(frozen=True, slots=True)
class NaiveHit:
    memory_id: str
    score: float


class NaiveMemory:
    """A dict projection behind a lock, a JSON-lines log, a linear-scan search."""

    def __init__(self, log_path: Path, *, durable: bool = False) -> None:
        self.log_path = log_path
        self.durable = durable
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def write(self, tenant_id: str, body: dict[str, Any], *, log: bool = True) -> dict[str, Any]:
        """Store an item; ``log=False`` skips the file (used only to load large N fast)."""
        now = time.time()
        item = {
            "id": body["id"],
            "tenant_id": tenant_id,
            "agent_id": body["agent_id"],
            "subject_id": body["subject_id"],
            "purpose": body["purpose"],
            "kind": body["kind"],
            "content": body["content"],
            "provenance": body["provenance"],
            "trust": body["trust"],
            "confidence": body["confidence"],
            "status": "active" if body["trust"] != "untrusted" else "quarantined",
            "created_at": now,
            "updated_at": now,
            "expires_at": now + TTL_SECONDS[body["kind"]],
            "version": 1,
        }
        with self._lock:
            self.items[(tenant_id, item["id"])] = item
            if log:
                self._append({"type": "memory.written", "item": item})
        return item

    def _append(self, event: dict[str, Any]) -> None:
        with open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(event) + "\n")
            if self.durable:
                handle.flush()
                os.fsync(handle.fileno())

    def reload(self) -> int:
        """Rebuild the dict from the log (the reference's 'replay'); the events read."""
        items: dict[tuple[str, str], dict[str, Any]] = {}
        count = 0
        with open(self.log_path, encoding="utf-8") as handle:
            for line in handle:
                event = json.loads(line)
                item = event["item"]
                items[(item["tenant_id"], item["id"])] = item
                count += 1
        with self._lock:
            self.items = items
        return count

    def search(
        self, tenant_id: str, agent_id: str, purpose: str, query: str, limit: int = 10
    ) -> list[NaiveHit]:
        """Scan every item: hard filters, then term matches × 10 + confidence + recency."""
        now = time.time()
        terms = set(_WORD.findall(query.lower()))
        scored = []
        with self._lock:
            for item in self.items.values():
                if (
                    item["tenant_id"] != tenant_id
                    or item["agent_id"] != agent_id
                    or item["purpose"] != purpose
                    or item["status"] != "active"
                    or item["expires_at"] <= now
                ):
                    continue
                words = set(_WORD.findall(item["content"].lower()))
                matches = len(terms & words)
                if not matches:
                    continue
                age_days = max(now - item["updated_at"], 0.0) / DAY
                recency = 1.0 / (1.0 + age_days / RECENCY_HALF_LIFE_DAYS)
                score = matches * 10 + item["confidence"] + recency
                scored.append(NaiveHit(item["id"], score))
        scored.sort(key=lambda hit: (-hit.score, hit.memory_id))
        return scored[:limit]
