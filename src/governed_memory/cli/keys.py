"""``gmem keys create|list|revoke``: API keys, administered on the store itself.

Whoever can run these commands against the store (its data directory or its database
URL) administers the keys; there is no key-administration API and no ``admin`` scope that
would grant one. Every key names the principal it belongs to, because four eyes compare
principals (``docs/concepts.md``).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any, TextIO

from governed_memory.apikeys import (
    create_api_key,
    key_id_of,
    parse_agents,
    parse_duration,
    parse_scopes,
)
from governed_memory.cli.commands import CommandError
from governed_memory.cli.options import opened_store
from governed_memory.core import values
from governed_memory.core.values import Scope, Trust
from governed_memory.records import ApiKey

PRINCIPAL_REQUIRED = (
    "--principal is required: name the person or service account the key belongs to "
    "(four eyes compare principals, so a key that names nobody defeats them)"
)
MAX_TRUST_REQUIRED = (
    "--max-trust is required for a key with memory:write: untrusted (every write is "
    "quarantined) or trusted"
)


def _instant(instant: datetime | None) -> str | None:
    return None if instant is None else instant.isoformat()


def key_json(key: ApiKey, now: datetime) -> dict[str, Any]:
    """What ``keys list --json`` shows of a key (never its secret or its hash)."""
    return {
        "key_id": key.key_id,
        "tenant_id": key.tenant_id,
        "principal": key.principal_id,
        "name": key.name,
        "agents": "*" if key.agents is None else sorted(key.agents),
        "scopes": sorted(scope.value for scope in key.scopes),
        "max_trust": key.max_trust.value,
        "state": key.state(now),
        "created_at": _instant(key.created_at),
        "expires_at": _instant(key.expires_at),
        "last_used_at": _instant(key.last_used_at),
        "revoked_at": _instant(key.revoked_at),
    }


def _expiry(args: argparse.Namespace, now: datetime) -> datetime | None:
    if args.expires_in is not None and args.expires_at is not None:
        raise CommandError("give --expires-in or --expires-at, not both")
    if args.expires_in is not None:
        return now + parse_duration(args.expires_in, "expires_in")
    if args.expires_at is not None:
        return values.utc(args.expires_at, "expires_at")
    return None


def _max_trust(args: argparse.Namespace, scopes: frozenset[Scope]) -> Trust:
    """The key's trust ceiling; only a key that writes has to name one."""
    if args.max_trust is None:
        if Scope.MEMORY_WRITE in scopes:
            raise CommandError(MAX_TRUST_REQUIRED)
        return Trust.UNTRUSTED
    return values.enum_value(Trust, args.max_trust, "max_trust")


def create(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem keys create``: a new API key of a named principal, printed once."""
    if not args.principal:
        raise CommandError(PRINCIPAL_REQUIRED)
    agents = parse_agents(args.agents.split(","))
    scopes = parse_scopes(args.scopes.split(","))
    trust = _max_trust(args, scopes)
    now = datetime.now(UTC)
    record, token = create_api_key(
        args.tenant,
        agents,
        scopes,
        trust,
        now,
        args.name,
        principal=args.principal,
        expires_at=_expiry(args, now),
    )
    with opened_store(args) as store:
        store.add_api_key(record)
    if args.json:
        print(
            json.dumps({"key_id": record.key_id, "api_key": token} | key_json(record, now)),
            file=out,
        )
        return 0
    until = "" if record.expires_at is None else f", until {_instant(record.expires_at)}"
    print(
        f"API key {record.key_id} of {record.principal_id}, tenant {record.tenant_id}{until}:",
        file=out,
    )
    print(f"  {token}", file=out)
    print("Store this key now: it is shown only once and cannot be recovered.", file=out)
    return 0


def _line(key: ApiKey, now: datetime) -> str:
    def at(instant: datetime | None) -> str:
        return "-" if instant is None else instant.strftime("%Y-%m-%dT%H:%M:%SZ")

    agents = "*" if key.agents is None else ",".join(sorted(key.agents))
    scopes = ",".join(sorted(scope.value for scope in key.scopes))
    return (
        f"{key.key_id}  {key.tenant_id}  {key.principal_id}  {key.state(now)}  "
        f"created={at(key.created_at)}  expires={at(key.expires_at)}  "
        f"last_used={at(key.last_used_at)}  agents={agents}  scopes={scopes}  "
        f"max_trust={key.max_trust.value}  name={key.name or '-'}"
    )


def list_(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem keys list``: every key's principal, state, dates and grants; never a secret."""
    with opened_store(args, read_only=True) as store:
        keys = store.api_keys(args.tenant)
    now = datetime.now(UTC)
    if args.json:
        print(json.dumps([key_json(key, now) for key in keys]), file=out)
        return 0
    for key in keys:
        print(_line(key, now), file=out)
    return 0


def revoke(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem keys revoke``: the key is refused from its next request on."""
    key_id = key_id_of(args.key)
    if key_id is None:
        # Never echo the argument: it may be a mistyped key, secret and all.
        raise CommandError(
            "expected a key id (the 16 hex characters after gmem_) or a whole API key"
        )
    with opened_store(args) as store:
        record = store.api_key(key_id)
        if record is None:
            raise CommandError(f"no API key with id {key_id}")
        if record.revoked_at is not None:
            print(f"{key_id} was revoked already, at {_instant(record.revoked_at)}", file=out)
            return 0
        store.revoke_api_key(key_id, datetime.now(UTC))
    print(f"revoked {key_id} of {record.principal_id}", file=out)
    return 0


__all__ = ["MAX_TRUST_REQUIRED", "PRINCIPAL_REQUIRED", "create", "key_json", "list_", "revoke"]
