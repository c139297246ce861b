"""``gmem``: serve the HTTP API, manage API keys, and look after a store (SPEC §11).

Every command reads the ``GMEM_*`` settings (SPEC §9); its flags mirror them and win over
them. Every command accepts ``--data-dir`` and ``--database-url``. An error ends the
command with a non-zero status and one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TextIO

from governed_memory.apikeys import (
    create_api_key,
    parse_agents,
    parse_scopes,
)
from governed_memory.config import Settings, load_settings
from governed_memory.core.values import Trust, enum_value
from governed_memory.errors import GovernedMemoryError
from governed_memory.factory import open_store
from governed_memory.mcp_server import add_command as add_mcp_command
from governed_memory.ports import Store
from governed_memory.records import ApiKey
from governed_memory.service import MemoryService

STORE_FIELDS = ("data_dir", "database_url", "sqlite_synchronous")
SERVER_FIELDS = (
    "host",
    "port",
    "rate_limit_requests",
    "rate_limit_window_seconds",
    "max_body_bytes",
    "expiry_interval_seconds",
    "log_level",
)
TTL_FIELDS = tuple(name for name in Settings.model_fields if name.startswith("ttl_"))
SERVE_FIELDS = (*STORE_FIELDS, *SERVER_FIELDS, *TTL_FIELDS, "metrics_enabled")


class CommandError(Exception):
    """A command cannot do what it was asked; the message is the one line to print."""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


METAVARS = {
    "data_dir": "DIR",
    "database_url": "URL",
    "sqlite_synchronous": "FULL|NORMAL",
    "host": "HOST",
    "port": "PORT",
    "rate_limit_requests": "N",
    "max_body_bytes": "BYTES",
    "log_level": "LEVEL",
}


def _add_settings(parser: argparse.ArgumentParser, fields: Sequence[str]) -> None:
    """One flag per setting, mirroring its GMEM_* variable (left unset: env or default)."""
    group = parser.add_argument_group("settings (each flag mirrors its GMEM_* variable)")
    group.add_argument("--config", metavar="FILE", help="a KEY=value settings file")
    for field in fields:
        default = Settings.model_fields[field].default
        shown = "unset" if default is None else default
        text = f"GMEM_{field.upper()} (default: {shown})"
        if field == "metrics_enabled":
            group.add_argument(
                _flag(field), dest=field, action=argparse.BooleanOptionalAction, help=text
            )
            continue
        metavar = METAVARS.get(field, "SECONDS" if field.endswith("seconds") else "VALUE")
        group.add_argument(_flag(field), dest=field, metavar=metavar, help=text)


def _settings(args: argparse.Namespace, fields: Sequence[str]) -> Settings:
    values = {field: getattr(args, field, None) for field in fields}
    return load_settings(config_file=args.config, **values)


def _store(settings: Settings) -> Store:
    return open_store(
        data_dir=settings.data_dir,
        database_url=settings.database_url,
        synchronous=settings.sqlite_synchronous,
        **settings.store_options(),
    )


@contextmanager
def _opened_store(args: argparse.Namespace) -> Iterator[Store]:
    store = _store(_settings(args, STORE_FIELDS))
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _opened_service(args: argparse.Namespace) -> Iterator[MemoryService]:
    from governed_memory.http.app import open_from_settings

    service = open_from_settings(_settings(args, STORE_FIELDS + TTL_FIELDS))
    try:
        yield service
    finally:
        service.store.close()


# -- commands -----------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    from governed_memory.http.app import create_app
    from governed_memory.http.server import serve
    from governed_memory.observability import configure_logging

    settings = _settings(args, SERVE_FIELDS)
    configure_logging(settings.log_level)
    app = create_app(settings)
    serve(app, settings.host, settings.port)
    return 0


def _key_json(key: ApiKey) -> dict[str, Any]:
    return {
        "key_id": key.key_id,
        "tenant_id": key.tenant_id,
        "name": key.name,
        "agents": "*" if key.agents is None else sorted(key.agents),
        "scopes": sorted(scope.value for scope in key.scopes),
        "max_trust": key.max_trust.value,
        "created_at": key.created_at.isoformat(),
        "revoked_at": None if key.revoked_at is None else key.revoked_at.isoformat(),
    }


def cmd_keys_create(args: argparse.Namespace, out: TextIO) -> int:
    agents = parse_agents(args.agents.split(","))
    scopes = parse_scopes(args.scopes.split(","))
    trust = enum_value(Trust, args.max_trust, "max_trust")
    with _opened_store(args) as store:
        record, token = create_api_key(
            args.tenant, agents, scopes, trust, datetime.now(UTC), args.name
        )
        store.add_api_key(record)
    if args.json:
        print(json.dumps({"key_id": record.key_id, "api_key": token} | _key_json(record)), file=out)
        return 0
    print(f"API key {record.key_id} for tenant {record.tenant_id}:", file=out)
    print(f"  {token}", file=out)
    print("Store this key now: it is shown only once and cannot be recovered.", file=out)
    return 0


def cmd_keys_list(args: argparse.Namespace, out: TextIO) -> int:
    with _opened_store(args) as store:
        keys = store.api_keys(args.tenant)
    if args.json:
        print(json.dumps([_key_json(key) for key in keys]), file=out)
        return 0
    for key in keys:
        row = _key_json(key)
        state = "revoked" if key.revoked_at else "active"
        agents = row["agents"] if row["agents"] == "*" else ",".join(row["agents"])
        print(
            f"{key.key_id}  {key.tenant_id}  {state}  agents={agents}  "
            f"scopes={','.join(row['scopes'])}  max_trust={row['max_trust']}  "
            f"name={key.name or '-'}",
            file=out,
        )
    return 0


def cmd_keys_revoke(args: argparse.Namespace, out: TextIO) -> int:
    with _opened_store(args) as store:
        if not store.revoke_api_key(args.key_id, datetime.now(UTC)):
            raise CommandError(f"no API key with id {args.key_id!r}")
    print(f"revoked {args.key_id}", file=out)
    return 0


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    import httpx

    from governed_memory.http.app import create_app
    from governed_memory.http.server import running
    from governed_memory.http.walkthrough import demo_keys, walkthrough

    with tempfile.TemporaryDirectory(prefix="gmem-demo-") as scratch:
        if args.data_dir is None and args.database_url is None:
            args.data_dir = scratch
        settings = _settings(args, STORE_FIELDS + TTL_FIELDS)
        app = create_app(settings)
        tenant = "demo-" + secrets.token_hex(4)
        keys = demo_keys(app.state.service.store, tenant, datetime.now(UTC))
        print(f"walkthrough over HTTP, tenant {tenant}, store in {settings.data_dir}", file=out)
        with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
            walkthrough(client, keys, lambda line: print(line, file=out))
    return 0


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    with _opened_service(args) as service:
        if not args.verify:
            print(f"rebuilt {service.maintenance.rebuild()} item(s) from the log", file=out)
            return 0
        report = service.verify_replay()
    for difference in report.differences:
        print(difference, file=out)
    if not report.ok:
        raise CommandError(f"replay found {len(report.differences)} difference(s)")
    print(f"replay clean: {report.events} event(s), {report.items} item(s)", file=out)
    return 0


def cmd_expire(args: argparse.Namespace, out: TextIO) -> int:
    with _opened_service(args) as service:
        print(f"expired {service.expire_due()} item(s)", file=out)
    return 0


def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    with _opened_service(args) as service:
        records = service.maintenance.export()
        if args.output == "-":
            count = _write_lines(records, out)
        else:
            with Path(args.output).open("w", encoding="utf-8") as handle:
                count = _write_lines(records, handle)
            print(f"exported {count} record(s) to {args.output}", file=out)
    return 0


def _write_lines(records: Iterator[dict[str, Any]], handle: TextIO) -> int:
    count = 0
    for record in records:
        handle.write(json.dumps(record, separators=(",", ":")) + "\n")
        count += 1
    return count


def cmd_import(args: argparse.Namespace, out: TextIO) -> int:
    with _opened_service(args) as service:
        if args.file == "-":
            report = service.maintenance.import_log(sys.stdin)
        else:
            with Path(args.file).open(encoding="utf-8") as handle:
                report = service.maintenance.import_log(handle)
    print(
        f"imported {report.events} event(s), {report.subject_keys} subject key(s); "
        f"rebuilt {report.items} item(s)",
        file=out,
    )
    return 0


def cmd_migrate(args: argparse.Namespace, out: TextIO) -> int:
    with _opened_store(args) as store:  # opening a store applies pending migrations
        version = store.schema_version()
    print(f"schema up to date (schema version {version})", file=out)
    return 0


# -- parser -------------------------------------------------------------------------------

Command = Callable[[argparse.Namespace, TextIO], int]


def build_parser() -> argparse.ArgumentParser:
    """The ``gmem`` parser with every command."""
    parser = _Parser(prog="gmem", description=__doc__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        subparsers: Any, name: str, run: Command, text: str, fields: Sequence[str] = STORE_FIELDS
    ) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = subparsers.add_parser(name, help=text, description=text)
        sub.set_defaults(run=run)
        _add_settings(sub, fields)
        return sub

    command(
        commands,
        "serve",
        cmd_serve,
        "Serve the HTTP API until SIGTERM/SIGINT.",
        SERVE_FIELDS,
    )

    keys = commands.add_parser("keys", help="Create, list and revoke API keys.")
    key_commands = keys.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    create = command(
        key_commands, "create", cmd_keys_create, "Create an API key; it is shown only once."
    )
    create.add_argument("--tenant", required=True, help="the tenant the key belongs to")
    create.add_argument(
        "--agents", required=True, help="agents it may act for: a,b or '*' for every agent"
    )
    create.add_argument(
        "--scopes",
        required=True,
        help="comma-separated: memory:write, memory:read, memory:review, subject:forget, "
        "audit:read, admin",
    )
    create.add_argument(
        "--max-trust", required=True, help="highest trust it may write: untrusted or trusted"
    )
    create.add_argument("--name", help="a label for people (not secret)")
    create.add_argument("--json", action="store_true", help="print one JSON object")
    listing = command(key_commands, "list", cmd_keys_list, "List API keys (never secrets).")
    listing.add_argument("--tenant", help="only this tenant's keys")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    revoke = command(key_commands, "revoke", cmd_keys_revoke, "Revoke an API key at once.")
    revoke.add_argument("key_id", help="the key id (the part after gmem_)")

    command(
        commands,
        "demo",
        cmd_demo,
        "Run the lifecycle walkthrough over HTTP against a throwaway store.",
        STORE_FIELDS + TTL_FIELDS,
    )
    replay = command(
        commands,
        "replay",
        cmd_replay,
        "Rebuild the projection from the log, or with --verify compare it item by item.",
    )
    replay.add_argument(
        "--verify", action="store_true", help="only compare; exit 1 on any difference"
    )
    command(commands, "expire", cmd_expire, "Expire every item whose TTL has run out, now.")
    export = command(
        commands, "export", cmd_export, "Write the event log as JSON Lines (content sealed)."
    )
    export.add_argument("--output", required=True, metavar="FILE", help="file, or - for stdout")
    importer = command(
        commands, "import", cmd_import, "Load a JSON Lines export into an empty store."
    )
    importer.add_argument("file", metavar="FILE", help="file, or - for stdin")
    command(commands, "migrate", cmd_migrate, "Apply pending schema migrations.")
    add_mcp_command(commands)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run ``gmem``; return the exit status."""
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        status: int = args.run(args, out)
    except GovernedMemoryError as error:  # ConfigError included
        return _fail(error.detail)
    except CommandError as error:
        return _fail(str(error))
    except OSError as error:
        where = f": {error.filename}" if error.filename else ""
        return _fail(f"{error.strerror or type(error).__name__}{where}")
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # noqa: BLE001 - one line, never a traceback quoting input
        return _fail(f"unexpected {type(error).__name__}")
    return status


def _fail(message: str) -> int:
    print(f"gmem: error: {message}", file=sys.stderr)
    return 1


__all__ = ["build_parser", "main"]


if __name__ == "__main__":
    sys.exit(main())
