"""The crash loop: SIGKILL the real ``gmem serve`` under load, restart it, prove nothing was lost.

Each cycle starts ``gmem serve`` over one SQLite data directory, lets worker threads drive
creates, rewrites, promotions, rejections and forgets over HTTP, and kills the process with
SIGKILL at a random moment (now and then while it is still starting). Then, with the server
down, ``gmem replay --verify`` must be clean and the database must hold no half-applied
command; the server must come back; every request that was in flight when it died is
retried with its idempotency key and must answer as if it ran exactly once; and every item
any worker ever touched must be exactly as the acknowledged responses say: version,
status, trust and content, or deleted with no content once its subject was forgotten.

Every worker owns its items and subjects and has at most one request in flight, so the
expected state is exact, not a range. Run it with ``make crash-test`` or::

    python -m tests.reliability.crashloop --cycles 50 --min-writes 10000 --synchronous FULL
"""

from __future__ import annotations

import argparse
import json
import random
import secrets
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.reliability.servers import ServerProcess, create_key, gmem

SUBJECTS_PER_WORKER = 3
DEFAULT_PROVENANCE = {"source": "crash-loop", "ref": "cycle"}


@dataclass
class Expected:
    """What the acknowledged responses say an item is now."""

    subject: str
    version: int
    status: str
    trust: str
    content: str | None


@dataclass
class Op:
    """One mutating request, sent with its own idempotency key."""

    kind: str  # create, rewrite, promote, reject, forget
    key: str
    method: str
    path: str
    body: dict[str, Any]
    reviewer: bool
    target: str  # memory id, or subject for a forget


@dataclass
class Stats:
    """What a run did and saw."""

    seed: int = 0
    cycles: int = 0
    startup_kills: int = 0
    acked: Counter[str] = field(default_factory=Counter)
    in_doubt_committed: int = 0
    in_doubt_lost: int = 0
    items: int = 0
    events: int = 0
    ready_seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def acked_writes(self) -> int:
        return self.acked["create"] + self.acked["rewrite"]

    def summary(self) -> dict[str, Any]:
        ready = sorted(self.ready_seconds) or [0.0]
        return {
            "seed": self.seed,
            "cycles": self.cycles,
            "startup_kills": self.startup_kills,
            "acknowledged": dict(self.acked),
            "acknowledged_writes": self.acked_writes,
            "in_doubt_committed_before_the_kill": self.in_doubt_committed,
            "in_doubt_not_committed": self.in_doubt_lost,
            "items": self.items,
            "events": self.events,
            "start_to_ready_seconds_max": round(ready[-1], 3),
            "start_to_ready_seconds_median": round(ready[len(ready) // 2], 3),
            "failures": self.failures,
        }


class Worker:
    """One client thread that owns its items and subjects; one request in flight at most."""

    def __init__(self, number: int, run_id: str, rng: random.Random) -> None:
        self.number = number
        self.run_id = run_id
        self.rng = rng
        self.items: dict[str, Expected] = {}
        self.pending: Op | None = None
        self.sequence = 0
        self.acked: Counter[str] = Counter()
        self.failures: list[str] = []

    # -- choosing the next request --------------------------------------------------------

    def _content(self, memory_id: str, version: int) -> str:
        token = "tok" + secrets.token_hex(6)
        return f"Crash loop note {memory_id} version {version}: {token} stays findable."

    def _write(
        self, kind: str, memory_id: str, subject: str, version: int, active: bool = False
    ) -> Op:
        # An untrusted rewrite may not replace an active item (it takes a correction).
        trust = "trusted" if active else self.rng.choice(["trusted", "untrusted"])
        body = {
            "agent_id": "crash-bot",
            "subject_id": subject,
            "purpose": "reliability",
            "kind": "fact",
            "content": self._content(memory_id, version + 1),
            "provenance": DEFAULT_PROVENANCE,
            "trust": trust,
            "confidence": 0.5,
            "expected_version": version,
        }
        return Op(kind, self._key(), "PUT", f"/v1/memories/{memory_id}", body, False, memory_id)

    def _key(self) -> str:
        self.sequence += 1
        return f"{self.run_id}-w{self.number}-{self.sequence}"

    def next_op(self) -> Op:
        live = [i for i, e in self.items.items() if e.status in ("active", "quarantined")]
        waiting = [i for i, e in self.items.items() if e.status == "quarantined"]
        roll = self.rng.random()
        if roll < 0.03:
            subject = f"w{self.number}-s{self.rng.randrange(SUBJECTS_PER_WORKER)}"
            path = f"/v1/subjects/{subject}/forget"
            return Op("forget", self._key(), "POST", path, {}, False, subject)
        if roll < 0.18 and waiting:
            memory_id = self.rng.choice(waiting)
            kind = "promote" if self.rng.random() < 0.8 else "reject"
            body = {"expected_version": self.items[memory_id].version}
            path = f"/v1/memories/{memory_id}/{kind}"
            return Op(kind, self._key(), "POST", path, body, True, memory_id)
        if roll < 0.45 and live:
            memory_id = self.rng.choice(live)
            current = self.items[memory_id]
            active = current.status == "active"
            return self._write("rewrite", memory_id, current.subject, current.version, active)
        memory_id = f"w{self.number}-{self.run_id}-{self.sequence}"
        subject = f"w{self.number}-s{self.rng.randrange(SUBJECTS_PER_WORKER)}"
        return self._write("create", memory_id, subject, 0)

    # -- the model ------------------------------------------------------------------------

    def expect(self, op: Op) -> dict[str, Expected]:
        """The items ``op`` changes, as they must be once it has run exactly once."""
        if op.kind == "forget":
            return {
                memory_id: Expected(item.subject, item.version + 1, "deleted", item.trust, None)
                for memory_id, item in self.items.items()
                if item.subject == op.target and item.status != "deleted"
            }
        current = self.items.get(op.target)
        if op.kind in ("create", "rewrite"):
            trust = op.body["trust"]
            status = "active" if trust == "trusted" else "quarantined"
            version = op.body["expected_version"] + 1
            return {
                op.target: Expected(
                    op.body["subject_id"], version, status, trust, op.body["content"]
                )
            }
        assert current is not None
        if op.kind == "promote":
            return {
                op.target: Expected(
                    current.subject, current.version + 1, "active", "verified", current.content
                )
            }
        return {
            op.target: Expected(
                current.subject, current.version + 1, "rejected", current.trust, current.content
            )
        }

    def check_response(self, op: Op, response: httpx.Response) -> None:
        """Compare an acknowledgement with the model, then adopt it."""
        expected = self.expect(op)
        if response.status_code >= 300:
            self.failures.append(
                f"{op.kind} {op.target}: unexpected {response.status_code} {response.text[:200]}"
            )
            return
        data = response.json()
        if op.kind == "forget":
            if data["affected"] != len(expected):
                self.failures.append(
                    f"forget {op.target}: affected {data['affected']}, expected {len(expected)}"
                )
        else:
            want = expected[op.target]
            got = (data["version"], data["status"], data["trust"], data["content"])
            if got != (want.version, want.status, want.trust, want.content):
                self.failures.append(f"{op.kind} {op.target}: answered {got[:3]}, expected {want}")
        self.items.update(expected)

    # -- the thread -----------------------------------------------------------------------

    def run(
        self, url: str, headers: dict[str, str], reviewer: dict[str, str], stop: threading.Event
    ) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            while not stop.is_set() and not self.failures:
                op = self.next_op()
                self.pending = op
                try:
                    response = send(client, op, headers, reviewer)
                except httpx.TransportError:
                    return  # the server died with this request in flight: it stays pending
                self.pending = None
                if response.status_code < 300:
                    self.acked[op.kind] += 1
                self.check_response(op, response)


def send(
    client: httpx.Client, op: Op, headers: dict[str, str], reviewer: dict[str, str]
) -> httpx.Response:
    """Send ``op`` with its idempotency key, as the writer or the reviewer."""
    auth = reviewer if op.reviewer else headers
    return client.request(
        op.method, op.path, json=op.body, headers=auth | {"Idempotency-Key": op.key}
    )


# -- checks with the server down ----------------------------------------------------------


def check_database(path: Path) -> list[str]:
    """No half-applied command: projection, postings and idempotency agree with the log."""
    problems = []
    conn = sqlite3.connect(path)
    try:
        queries = {
            "integrity_check is not ok": (
                "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check != 'ok'"
            ),
            "an active item has no search document": (
                "SELECT count(*) FROM memories m WHERE m.status = 'active' "
                "AND NOT EXISTS (SELECT 1 FROM search_docs d WHERE d.item = m.rowid)"
            ),
            "a search document belongs to no active item": (
                "SELECT count(*) FROM search_docs d WHERE NOT EXISTS "
                "(SELECT 1 FROM memories m WHERE m.rowid = d.item AND m.status = 'active')"
            ),
            "a scope's statistics disagree with its documents": (
                "SELECT count(*) FROM scopes s WHERE s.documents != "
                "(SELECT count(*) FROM search_docs d WHERE d.scope = s.id)"
            ),
            "an idempotency record points at no event": (
                "SELECT count(*) FROM idempotency i WHERE i.position IS NOT NULL "
                "AND NOT EXISTS (SELECT 1 FROM events e WHERE e.position = i.position)"
            ),
        }
        for problem, query in queries.items():
            (count,) = conn.execute(query).fetchone()
            if count:
                problems.append(f"{problem} ({count})")
    finally:
        conn.close()
    return problems


# -- the loop -----------------------------------------------------------------------------


class CrashLoop:
    """A data directory, its keys, the workers' ledgers, and the cycles over them."""

    def __init__(
        self,
        data_dir: Path,
        *,
        workers: int = 8,
        synchronous: str = "FULL",
        seed: int | None = None,
        max_traffic_seconds: float = 2.5,
        startup_kill_rate: float = 0.15,
        log: Path | None = None,
        serve_workers: int = 1,
    ) -> None:
        self.data_dir = data_dir
        self.seed = seed if seed is not None else secrets.randbits(32)
        self.rng = random.Random(self.seed)
        self.max_traffic_seconds = max_traffic_seconds
        self.startup_kill_rate = startup_kill_rate
        self.env = {
            "GMEM_SQLITE_SYNCHRONOUS": synchronous,
            "GMEM_RATE_LIMIT_REQUESTS": str(10**9),
            "GMEM_LOG_LEVEL": "WARNING",
            "GMEM_WORKERS": str(serve_workers),
        }
        self.log = log or data_dir.parent / "crashloop-server.log"
        # With several worker processes every kill is of them all at once (a process group).
        self.serve_workers = serve_workers
        self.server = ServerProcess(data_dir, self.log, self.env, group=serve_workers > 1)
        writer = create_key(
            data_dir,
            scopes="memory:write,memory:read,subject:forget,audit:read",
            env=self.server.env,
        )
        reviewer = create_key(
            data_dir, scopes="memory:review", trust="untrusted", env=self.server.env
        )
        # The checks read every item's content, unreviewed ones included: a reviewer's read.
        auditor = create_key(
            data_dir, scopes="memory:read,memory:review", trust="untrusted", env=self.server.env
        )
        self.headers = {"Authorization": f"Bearer {writer}"}
        self.reviewer = {"Authorization": f"Bearer {reviewer}"}
        self.auditor = {"Authorization": f"Bearer {auditor}"}
        run_id = secrets.token_hex(3)
        self.workers = [Worker(n, run_id, random.Random(self.rng.random())) for n in range(workers)]
        self.stats = Stats(seed=self.seed)

    def fail(self, message: str) -> None:
        self.stats.failures.append(f"cycle {self.stats.cycles}: {message}")

    def cycle(self) -> bool:
        """Start, load, kill; check with the server down; restart and check everything.

        False when the server did not come back (a failure that ends the run).
        """
        self.stats.cycles += 1
        self.server.start()
        if self.rng.random() < self.startup_kill_rate:
            if not self._starting():
                return False
        elif not self._ready():
            return False
        else:
            self._traffic()
        self.server.kill()
        self._check_down()
        self.server.start()
        if not self._ready():
            return False
        try:
            with httpx.Client(base_url=self.server.url, timeout=30) as client:
                self._resolve_in_doubt(client)
                self._check_items(client)
                self._check_feed(client)
        finally:
            self.server.kill()
        return True

    def _starting(self) -> bool:
        """Let start-up begin its work, then a random moment later (maybe before it is
        ready, maybe just after) leave the kill to the cycle: once a process holds the
        store open (migrations, the master key's check) and, with several, every worker
        process runs (each opening the store), so the kill lands on them all at once."""
        processes = self.serve_workers + 1 if self.serve_workers > 1 else 1
        try:
            self.server.wait_started(self.data_dir / "gmem.sqlite3", processes)
        except RuntimeError as error:
            self.server.kill()
            self.fail(f"start-up: {error}")
            return False
        time.sleep(self.rng.uniform(0, 0.3))
        self.stats.startup_kills += 1
        return True

    def _ready(self) -> bool:
        try:
            self.stats.ready_seconds.append(self.server.wait_ready())
        except RuntimeError as error:
            self.server.kill()
            tail = self.log.read_text(errors="replace").splitlines()[-3:]
            self.fail(f"the server did not come back: {error}; its log ends {tail}")
            return False
        return True

    def _traffic(self) -> None:
        stop = threading.Event()
        threads = [
            threading.Thread(
                target=w.run, args=(self.server.url, self.headers, self.reviewer, stop)
            )
            for w in self.workers
        ]
        for thread in threads:
            thread.start()
        time.sleep(self.rng.uniform(0.1, self.max_traffic_seconds))
        self.server.kill()  # SIGKILL while the workers are mid-request
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        for worker in self.workers:
            self.stats.acked.update(worker.acked)
            worker.acked.clear()
            for failure in worker.failures:
                self.fail(f"worker {worker.number}: {failure}")
            worker.failures.clear()

    def _check_down(self) -> None:
        try:
            out = gmem(self.data_dir, "replay", "--verify", env=self.server.env)
        except RuntimeError as error:
            self.fail(f"replay --verify: {error}")
        else:
            if "replay clean" not in out:
                self.fail(f"replay --verify said: {out.strip()[:300]}")
        for problem in check_database(self.data_dir / "gmem.sqlite3"):
            self.fail(problem)

    def _resolve_in_doubt(self, client: httpx.Client) -> None:
        """Retry each request that was in flight with its key: it must take effect once."""
        for worker in self.workers:
            op, worker.pending = worker.pending, None
            if op is None:
                continue
            expected = worker.expect(op)
            if expected:
                probe_id, probe = next(iter(expected.items()))
                seen = client.get(f"/v1/memories/{probe_id}", headers=self.headers)
                committed = seen.status_code == 200 and seen.json()["version"] == probe.version
                if committed:
                    self.stats.in_doubt_committed += 1
                else:
                    self.stats.in_doubt_lost += 1
            response = send(client, op, self.headers, self.reviewer)
            if response.status_code < 300:
                self.stats.acked[op.kind] += 1
            worker.check_response(op, response)
            for failure in worker.failures:
                self.fail(f"in-doubt retry of worker {worker.number}: {failure}")
            worker.failures.clear()

    def _check_items(self, client: httpx.Client) -> None:
        """Every item any worker touched is exactly what the acknowledgements say."""
        count = 0
        for worker in self.workers:
            for memory_id, want in worker.items.items():
                count += 1
                response = client.get(f"/v1/memories/{memory_id}", headers=self.auditor)
                if response.status_code != 200:
                    self.fail(f"{memory_id}: GET answered {response.status_code}")
                    continue
                item = response.json()
                got = (item["version"], item["status"], item["trust"], item["content"])
                if got != (want.version, want.status, want.trust, want.content):
                    self.fail(f"{memory_id}: is {got}, acknowledged {asdict(want)}")
                if want.status == "active" and self.rng.random() < 0.05:
                    self._check_findable(client, memory_id, want)
        self.stats.items = count

    def _check_findable(self, client: httpx.Client, memory_id: str, want: Expected) -> None:
        assert want.content is not None
        token = next(word for word in want.content.split() if word.startswith("tok"))
        body = {"agent_id": "crash-bot", "purpose": "reliability", "query": token}
        found = client.post("/v1/search", json=body, headers=self.headers).json()
        if [hit["id"] for hit in found["items"]] != [memory_id]:
            self.fail(f"{memory_id}: a search for its own token did not find it alone")

    def _check_feed(self, client: httpx.Client) -> None:
        """The log holds each (item, version) once: no retry ever wrote twice."""
        seen: Counter[tuple[str, int]] = Counter()
        after, total = 0, 0
        while True:
            page = client.get(
                "/v1/events", params={"after": after, "limit": 1000}, headers=self.headers
            )
            events = page.json()["events"]
            if not events:
                break
            for event in events:
                total += 1
                if event["memory_id"] is not None:
                    seen[(event["memory_id"], event["version"])] += 1
            after = events[-1]["position"]
        doubled = [key for key, n in seen.items() if n > 1]
        if doubled:
            self.fail(f"{len(doubled)} (item, version) pairs have two events, e.g. {doubled[0]}")
        self.stats.events = total
        for worker in self.workers:
            for memory_id, want in worker.items.items():
                missing = [v for v in range(1, want.version + 1) if (memory_id, v) not in seen]
                # Versions made by a forget are in its one subject.forgotten event.
                if missing and want.status != "deleted":
                    self.fail(f"{memory_id}: no event for versions {missing[:5]}")


def run(
    cycles: int,
    *,
    workers: int = 8,
    synchronous: str = "FULL",
    seed: int | None = None,
    data_dir: Path | None = None,
    max_traffic_seconds: float = 2.5,
    progress: bool = False,
    serve_workers: int = 1,
    startup_kill_rate: float = 0.15,
) -> Stats:
    """Run ``cycles`` crash cycles; the stats (``failures`` empty when nothing was lost)."""
    with tempfile.TemporaryDirectory(prefix="gmem-crash-") as scratch:
        root = data_dir or Path(scratch)
        loop = CrashLoop(
            root / "data",
            workers=workers,
            synchronous=synchronous,
            seed=seed,
            max_traffic_seconds=max_traffic_seconds,
            log=root / "server.log",
            serve_workers=serve_workers,
            startup_kill_rate=startup_kill_rate,
        )
        try:
            for _ in range(cycles):
                if not loop.cycle():
                    break
                if progress:
                    s = loop.stats
                    print(
                        f"cycle {s.cycles}: {s.acked_writes} acknowledged writes, "
                        f"{s.items} items, {s.events} events, {len(s.failures)} failures",
                        flush=True,
                    )
                if len(loop.stats.failures) > 50:
                    break
        finally:
            loop.server.kill()
        log_text = (root / "server.log").read_text(errors="replace")
        if "Traceback" in log_text or '"level": "ERROR"' in log_text:
            loop.stats.failures.append("the server logged an error or a traceback")
        return loop.stats


def _serve_workers(text: str) -> int:
    """``--serve-workers``: ``gmem serve --workers`` takes 1 to 64."""
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 1 to 64")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.reliability.crashloop", description=__doc__
    )
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--synchronous", choices=["FULL", "NORMAL"], default="FULL")
    parser.add_argument("--seed", type=int)
    parser.add_argument(
        "--min-writes", type=int, default=0, help="fail unless this many writes were acknowledged"
    )
    parser.add_argument("--max-traffic-seconds", type=float, default=2.5)
    parser.add_argument(
        "--serve-workers",
        type=_serve_workers,
        default=1,
        metavar="N",
        help="gmem serve --workers N (1 to 64); each kill ends them all at once",
    )
    parser.add_argument("--data-dir", type=Path, help="keep the data here (default: a temp dir)")
    parser.add_argument("--report", type=Path, help="write the JSON summary here too")
    args = parser.parse_args(argv)
    started = time.monotonic()
    stats = run(
        args.cycles,
        workers=args.workers,
        synchronous=args.synchronous,
        seed=args.seed,
        data_dir=args.data_dir,
        max_traffic_seconds=args.max_traffic_seconds,
        progress=True,
        serve_workers=args.serve_workers,
    )
    summary = {
        "synchronous": args.synchronous,
        "workers": args.workers,
        "serve_workers": args.serve_workers,
        "seconds": round(time.monotonic() - started, 1),
    } | stats.summary()
    if stats.acked_writes < args.min_writes:
        summary["failures"].append(
            f"only {stats.acked_writes} acknowledged writes, wanted {args.min_writes}"
        )
    text = json.dumps(summary, indent=2)
    print(text)
    if args.report:
        args.report.write_text(text + "\n")
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
