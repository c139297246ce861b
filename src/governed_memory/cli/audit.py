"""``gmem audit verify|head``: the event log's hash chain, checked on the store itself.

Both only read, work on read-only media and need no master key: the chain hashes the
sealed content as stored (``docs/operations.md``, "Audit: a tamper-evident log").
"""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from governed_memory.cli.commands import CommandError
from governed_memory.cli.options import opened_store
from governed_memory.core import values
from governed_memory.errors import ValidationError
from governed_memory.service.chain_audit import Recorded, chain_heads, verify_chain

HEAD_FORMAT = "TENANT:POSITION:HASH (a line of gmem audit head)"


def parse_head(text: str) -> tuple[str, Recorded]:
    """A recorded head, ``tenant:position:hash``; ``CommandError`` if it is not one."""
    try:
        tenant, position, hexed = text.split(":")
        recorded = (int(position), bytes.fromhex(hexed))
        if recorded[0] < 1 or len(recorded[1]) != 32:
            raise ValueError
        return values.tenant_id(tenant), recorded
    except (ValueError, ValidationError):
        raise CommandError(f"--expect takes {HEAD_FORMAT}") from None


def verify(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem audit verify``: recompute every tenant's chain; name each first break."""
    recorded = dict(parse_head(text) for text in args.expect or ())
    with opened_store(args, read_only=True) as store:
        report = verify_chain(store, recorded)
    for found in report.breaks:
        print(f"broken: {found}", file=out)
    if not report.ok:
        first = report.breaks[0]
        raise CommandError(
            f"the hash chain of {len(report.breaks)} tenant(s) is broken; first: tenant "
            f"{first.tenant_id}, position {first.position}"
        )
    print(f"clean: {report.events} event(s) in {report.tenants} tenant(s)", file=out)
    return 0


def head(args: argparse.Namespace, out: TextIO) -> int:
    """``gmem audit head``: each tenant's last position and hash, to record elsewhere."""
    with opened_store(args, read_only=True) as store:
        heads = chain_heads(store)
    if args.json:
        rows = [
            {"tenant_id": h.tenant_id, "position": h.position, "hash": h.hash, "events": h.events}
            for h in heads
        ]
        print(json.dumps(rows, indent=2), file=out)
        return 0
    for h in heads:
        print(f"{h.tenant_id}:{h.position}:{h.hash}", file=out)
    return 0


__all__ = ["head", "parse_head", "verify"]
