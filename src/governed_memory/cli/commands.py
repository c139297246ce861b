"""What each ``gmem`` command does, given its parsed arguments and where to print.

A command returns its exit status; a refusal it can name is a :class:`CommandError`, whose
message is the one line ``gmem`` prints. The HTTP modules are imported inside the commands
that serve (``serve``, ``demo``) so that every other command starts without FastAPI.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from governed_memory.bootstrap import describe_store, open_from, store_location
from governed_memory.cli import notes
from governed_memory.cli.options import (
    SERVE_FIELDS,
    SERVICE_FIELDS,
    STORE_FIELDS,
    opened_service,
    opened_store,
    settings,
)
from governed_memory.cli.progress import rebuild_progress, step_progress
from governed_memory.cli.undo import undone_on_failure
from governed_memory.service.progress import counted


# Not a GovernedMemoryError: it is no error of the library, only the line a command prints
# when it cannot do what it was asked (see the note in governed_memory.errors).
class CommandError(Exception):
    """A command cannot do what it was asked; the message is the one line to print."""


def serve(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem serve``: the HTTP API in the foreground until SIGTERM or SIGINT."""
    from governed_memory.http.app import create_app  # FastAPI: only the commands that serve
    from governed_memory.http.protocol import Limits
    from governed_memory.http.server import announce, listen, raise_file_limit
    from governed_memory.http.server import serve as run_server
    from governed_memory.http.workers import serve_workers
    from governed_memory.observability import configure_logging

    chosen = settings(args, SERVE_FIELDS)
    listener = listen(chosen.host, chosen.port)  # a port in use fails before the store opens
    try:
        configure_logging(chosen.log_level)
        notes.detach()  # from here on, start-up notes are JSON lines like the rest
        limits = Limits(
            read_timeout=chosen.request_timeout_seconds, max_connections=chosen.max_connections
        )
        store = store_location(chosen.data_dir, chosen.database_url)
        if chosen.workers == 1:
            run_server(create_app(chosen), listener, limits, store=store)
            return 0
        raise_file_limit(limits.max_connections)
        # Opened once here: a setting, the database or a migration fails once, in one line,
        # and the migrations have run before the workers open the store.
        opened, _ = open_from(chosen)
        opened.close()
        announce(listener, store, chosen.workers)
        serve_workers(chosen, listener, limits)
    finally:
        listener.close()
    return 0


def demo(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem demo``: the lifecycle walkthrough over HTTP against a throwaway store."""
    import httpx  # the HTTP stack: only the commands that serve

    from governed_memory.http.app import create_app
    from governed_memory.http.server import running
    from governed_memory.http.walkthrough import demo_keys, walkthrough

    with tempfile.TemporaryDirectory(prefix="gmem-demo-") as scratch:
        chosen = settings(args, SERVICE_FIELDS)
        if args.data_dir is None and args.database_url is None:
            # Only a flag names a store for the demo; a configured one is never written to.
            chosen = chosen.model_copy(update={"data_dir": Path(scratch), "database_url": None})
        app = create_app(chosen)
        tenant = "demo-" + secrets.token_hex(4)
        keys = demo_keys(app.state.api_keys, tenant, datetime.now(UTC))
        where = describe_store(chosen.data_dir, chosen.database_url)
        print(f"walkthrough over HTTP, tenant {tenant}, {where}", file=out)
        with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
            walkthrough(client, keys, lambda line: print(line, file=out))
    return 0


# -- the store -----------------------------------------------------------------------------


def replay(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem replay``: rebuild the projection, or with ``--verify`` compare it."""
    with opened_service(args, read_only=args.verify) as service:
        if not args.verify:
            with rebuild_progress(out) as on_progress:
                count = service.maintenance.rebuild(on_progress)
            print(f"rebuilt {count} item(s) from the log", file=out)
            return 0
        with step_progress(out) as on_step:
            report = service.verify_replay(on_step)
    for difference in report.differences:
        print(difference, file=out)
    if not report.ok:
        repair = (
            f"; {report.index_differences} in the search index: `gmem reindex` rebuilds it "
            "from content"
            if report.index_differences
            else ""
        )
        raise CommandError(f"replay found {len(report.differences)} difference(s){repair}")
    print(f"replay clean: {report.events} event(s), {report.items} item(s)", file=out)
    return 0


def reindex(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem reindex``: rebuild the search index from the log with these search settings."""
    with opened_service(args, reindexing=True) as service:
        with rebuild_progress(out) as on_progress:
            count = service.maintenance.reindex(on_progress)
        signature = service.search_signature
    print(f"reindexed {count} item(s); the search index is now {signature}", file=out)
    return 0


def expire(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem expire``: expire every item whose TTL has run out, then destroy the content
    of every item past its retention window, now."""
    with opened_service(args) as service:
        print(f"expired {service.expire_due()} item(s)", file=out)
        report = service.apply_retention()
    print(f"destroyed the content of {report.destroyed} item(s) past retention", file=out)
    if report.legacy:
        print(
            f"skipped {report.legacy} item(s) past retention written before items had keys "
            "of their own: only forgetting their subjects destroys their content",
            file=out,
        )
    return 0


def export(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem export``: the event log as JSON Lines, content still sealed."""
    with opened_service(args, read_only=True) as service:
        records = service.maintenance.export(credentials=not args.without_credentials)
        if args.output == "-":  # the records are the output: no bar among them
            _write_lines(records, out)
            return 0
        with step_progress(out) as on_step, Path(args.output).open("w", encoding="utf-8") as handle:
            count = _write_lines(counted(records, on_step, "export"), handle)
    print(f"exported {count} record(s) to {args.output}", file=out)
    return 0


def _write_lines(records: Iterable[dict[str, Any]], handle: TextIO) -> int:
    count = 0
    for record in records:
        handle.write(json.dumps(record, separators=(",", ":")) + "\n")
        count += 1
    return count


def import_(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem import``: load an export into an empty store, then rebuild; a failed import
    leaves no store files and no master key it created (see :mod:`.undo`)."""
    with (
        undone_on_failure(settings(args, STORE_FIELDS)),
        opened_service(args, bind=False) as service,  # bound once the export checks out
        step_progress(out) as on_step,
    ):
        if args.file == "-":
            report = service.maintenance.import_log(sys.stdin, on_step)
        else:
            with Path(args.file).open(encoding="utf-8") as handle:
                report = service.maintenance.import_log(handle, on_step)
    print(
        f"imported {report.events} event(s), {report.subject_keys} subject key(s), "
        f"{report.item_keys} item key(s), {report.api_keys} API key(s), "
        f"{report.idempotency_records} idempotency record(s); rebuilt {report.items} item(s)",
        file=out,
    )
    return 0


def migrate(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem migrate``: apply pending schema migrations."""
    with opened_store(args) as store:  # opening a store applies pending migrations
        version = store.schema_version()
    print(f"schema up to date (schema version {version})", file=out)
    return 0


__all__ = [
    "CommandError",
    "demo",
    "expire",
    "export",
    "import_",
    "migrate",
    "reindex",
    "replay",
    "serve",
]
