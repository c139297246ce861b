"""The settings as flags, and what a command opens with them.

Every command reads the ``GMEM_*`` settings; its flags mirror them and win over them. The
store or service a command works on is opened by the composition root
(:mod:`governed_memory.bootstrap`) from those settings, and closed when the command ends.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from contextlib import closing

from governed_memory import bootstrap
from governed_memory.config import Settings, load_settings
from governed_memory.ports import Store
from governed_memory.service import MemoryService

STORE_FIELDS = ("data_dir", "database_url", "sqlite_synchronous", "database_pool_max")
SERVER_FIELDS = (
    "host",
    "port",
    "workers",
    "rate_limit_requests",
    "rate_limit_window_seconds",
    "max_body_bytes",
    "max_connections",
    "request_timeout_seconds",
    "expiry_interval_seconds",
    "log_level",
)
TTL_FIELDS = tuple(name for name in Settings.model_fields if name.startswith("ttl_"))
RETENTION_FIELDS = tuple(name for name in Settings.model_fields if name.startswith("retention_"))
SEARCH_FIELDS = ("search_language", "search_languages", "semantic")
SERVICE_FIELDS = STORE_FIELDS + TTL_FIELDS + RETENTION_FIELDS + SEARCH_FIELDS
#: Commands that (re)build the search index: the store and how the index is built.
INDEX_FIELDS = STORE_FIELDS + SEARCH_FIELDS
SERVE_FIELDS = (
    *STORE_FIELDS,
    *SERVER_FIELDS,
    *TTL_FIELDS,
    *RETENTION_FIELDS,
    *SEARCH_FIELDS,
    "metrics_enabled",
    "otel",
    "otel_exporter",
    "console_enabled",
    "console_idle_timeout_seconds",
    "console_secure_cookies",
)
#: Settings that are on or off: ``--x`` / ``--no-x``.
SWITCHES = frozenset({"metrics_enabled", "console_enabled", "console_secure_cookies"})

METAVARS = {
    "data_dir": "DIR",
    "database_url": "URL",
    "sqlite_synchronous": "FULL|NORMAL",
    "host": "HOST",
    "port": "PORT",
    "workers": "N",
    "rate_limit_requests": "N",
    "database_pool_max": "N",
    "max_connections": "N",
    "max_body_bytes": "BYTES",
    "log_level": "LEVEL",
    "search_language": "LANGUAGE",
    "search_languages": "TENANT:LANGUAGE,...",
    "semantic": "off|on",
    "otel": "off|on",
    "otel_exporter": "otlp|console|global",
}


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def add_settings(
    parser: argparse.ArgumentParser,
    fields: Sequence[str],
    helps: Mapping[str, str] | None = None,
) -> None:
    """One flag per setting, mirroring its GMEM_* variable (left unset: env or default);
    ``helps`` replaces the help of some flags (a command that reads a setting its own way)."""
    group = parser.add_argument_group("settings (each flag mirrors its GMEM_* variable)")
    group.add_argument("--config", metavar="FILE", help="a KEY=value settings file")
    for field in fields:
        default = Settings.model_fields[field].default
        shown = "unset" if default is None else default
        text = (helps or {}).get(field) or f"GMEM_{field.upper()} (default: {shown})"
        if field in SWITCHES:
            group.add_argument(
                _flag(field), dest=field, action=argparse.BooleanOptionalAction, help=text
            )
            continue
        metavar = METAVARS.get(field, "SECONDS" if field.endswith("seconds") else "VALUE")
        group.add_argument(_flag(field), dest=field, metavar=metavar, help=text)


def settings(args: argparse.Namespace, fields: Sequence[str]) -> Settings:
    """The settings of ``fields``: flags over ``GMEM_*`` over the file over defaults."""
    values = {field: getattr(args, field, None) for field in fields}
    return load_settings(config_file=args.config, **values)


def opened_store(args: argparse.Namespace, *, read_only: bool = False) -> closing[Store]:
    """The store the command's settings describe, to use in a ``with`` block; ``read_only``
    for a command that only reads (it then works on read-only media too)."""
    return closing(bootstrap.store_from(settings(args, STORE_FIELDS), read_only=read_only))


def opened_service(
    args: argparse.Namespace,
    *,
    read_only: bool = False,
    reindexing: bool = False,
    bind: bool = True,
) -> closing[MemoryService]:
    """The service the command's settings describe, to use in a ``with`` block
    (``read_only``, ``reindexing``, ``bind``: see
    :func:`governed_memory.bootstrap.service_from`)."""
    chosen = settings(args, SERVICE_FIELDS)
    return closing(
        bootstrap.service_from(chosen, read_only=read_only, reindexing=reindexing, bind=bind)
    )


def positive_count(text: str) -> int:
    """An argparse type: a whole number of at least 1 (argparse names the flag when this
    refuses it)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, not {text!r}")
    return int(text)


__all__ = [
    "INDEX_FIELDS",
    "RETENTION_FIELDS",
    "SEARCH_FIELDS",
    "SERVE_FIELDS",
    "SERVICE_FIELDS",
    "STORE_FIELDS",
    "add_settings",
    "opened_service",
    "opened_store",
    "positive_count",
    "settings",
]
