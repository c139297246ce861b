"""One connection attempt before the pool opens, so a wrong URL fails at once with its cause.

A pool that cannot connect retries in the background and logs a warning each time, and a
caller waits its whole timeout for ``PoolTimeout``. :func:`probe` connects once instead and,
if that fails, finds out why without reading the driver's message (it may quote values, and
it is translated in other locales): libpq gives no SQLSTATE for a refused login, so the
cause is established by what can be observed — whether the host resolves and its port
accepts a TCP connection (or the socket file exists), whether the server asked for a
password, and whether the same login reaches the ``postgres`` database.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from governed_memory.errors import StoreUnavailable

DEFAULT_PORT = 5432


def probe(dsn: str, timeout: float) -> None:
    """Connect once; a :class:`StoreUnavailable` naming the cause if that fails."""
    try:
        psycopg.connect(dsn, connect_timeout=max(1, round(timeout))).close()
    except psycopg.Error as error:
        raise StoreUnavailable(
            f"cannot connect to PostgreSQL at {_where(dsn)}: {_cause(dsn, error, timeout)}"
        ) from None


def _where(dsn: str) -> str:
    params = _params(dsn)
    host = str(params.get("host") or "localhost")
    return f"{host}:{params.get('port') or DEFAULT_PORT}/{params.get('dbname') or '(default)'}"


def _params(dsn: str) -> dict[str, Any]:
    try:
        return conninfo_to_dict(dsn)
    except psycopg.Error:
        return {}


def _cause(dsn: str, error: psycopg.Error, timeout: float) -> str:
    params = _params(dsn)
    if not params:
        return "the URL cannot be parsed"
    unreachable = _unreachable(params, timeout)
    if unreachable is not None:
        return unreachable
    pgconn = getattr(error, "pgconn", None)
    if pgconn is not None and pgconn.needs_password and not params.get("password"):
        return "the server asks for a password and none was given (put it in the URL or ~/.pgpass)"
    database = params.get("dbname")
    if database and database != "postgres" and _logs_in(params | {"dbname": "postgres"}, timeout):
        return (
            f"the database {database!r} does not exist, or the role may not connect to it "
            f"(create it first: createdb {database})"
        )
    return (
        "the server refused the login: the role does not exist, the password is wrong, "
        "or pg_hba.conf does not admit this client"
    )


def _unreachable(params: dict[str, Any], timeout: float) -> str | None:
    """Why nothing answers at the address, or ``None`` when a server does answer."""
    host = str(params.get("host") or "")
    port = int(params.get("port") or DEFAULT_PORT)
    if "," in host:
        return None  # several hosts: libpq tried them all; nothing simple to say
    if not host or host.startswith("/"):
        folder = host or "/var/run/postgresql"
        path = Path(folder) / f".s.PGSQL.{port}"
        return None if path.exists() else f"no PostgreSQL socket {path} (is the server running?)"
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except socket.gaierror:
        return f"the host name {host} does not resolve"
    except ConnectionRefusedError:
        return f"connection refused: nothing listens on {host}:{port} (is PostgreSQL running?)"
    except TimeoutError:
        return f"no answer from {host}:{port} within {timeout:g} s (a firewall, or a wrong host?)"
    except OSError as error:
        return f"{host}:{port} cannot be reached ({error.strerror or type(error).__name__})"
    return None


def _logs_in(params: dict[str, Any], timeout: float) -> bool:
    try:
        psycopg.connect(make_conninfo(**params), connect_timeout=max(1, round(timeout))).close()
    except psycopg.Error:
        return False
    return True


__all__ = ["probe"]
