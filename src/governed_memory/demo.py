"""The lifecycle walkthrough, step by step, on a store in a data directory.

Run with ``python -m governed_memory.demo --data-dir ./gmem-data``. It writes a trusted
memory (active) and an untrusted one (quarantined), searches, promotes, searches again,
forgets the subject and searches a last time, printing what happens at each step.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Callable

from governed_memory.core.model import Principal
from governed_memory.core.values import Scope, Trust
from governed_memory.errors import GovernedMemoryError
from governed_memory.factory import open_service
from governed_memory.service import MemoryService


def walkthrough(service: MemoryService, say: Callable[[str], None] = print) -> None:
    """Run the reference walkthrough against ``service``."""
    tenant = "demo-" + secrets.token_hex(4)
    subject = "customer-" + secrets.token_hex(4)
    operator = Principal(tenant, "operator", frozenset(Scope), Trust.TRUSTED)
    agent = Principal(
        tenant,
        "support-bot-key",
        frozenset({Scope.MEMORY_WRITE, Scope.MEMORY_READ}),
        Trust.UNTRUSTED,
        frozenset({"support-bot"}),
    )
    reviewer = Principal(tenant, "reviewer", frozenset({Scope.MEMORY_REVIEW}), Trust.UNTRUSTED)
    base = {
        "agent_id": "support-bot",
        "subject_id": subject,
        "purpose": "support",
        "kind": "preference",
        "expected_version": 0,
    }
    search = {"agent_id": "support-bot", "purpose": "support", "query": "contact email"}

    trusted = service.write(
        operator,
        base
        | {
            "content": "Prefers to be contacted by email, never by phone.",
            "provenance": {"source": "crm", "ref": "ticket-1"},
            "trust": "trusted",
        },
    ).item
    say(f"1. trusted write      -> {trusted.id} is {trusted.status.value}")
    untrusted = service.write(
        agent,
        base
        | {
            "content": "Said in chat: email contact works best on weekdays.",
            "provenance": {"source": "chat", "ref": "conversation-7"},
        },
    ).item
    say(f"2. untrusted write    -> {untrusted.id} is {untrusted.status.value}")
    say(f"3. search             -> {len(service.search(agent, search).items)} result(s)")
    promoted = service.promote(reviewer, untrusted.id, untrusted.version)
    say(
        f"4. promote            -> {promoted.id} is {promoted.status.value}, {promoted.trust.value}"
    )
    say(f"5. search             -> {len(service.search(agent, search).items)} result(s)")
    forgotten = service.forget_subject(operator, subject)
    say(f"6. forget subject     -> {forgotten.affected} item(s) deleted, key destroyed")
    say(f"7. search             -> {len(service.search(agent, search).items)} result(s)")
    report = service.verify_replay()
    verdict = "clean" if report.ok else "DIFFERENCES"
    say(f"8. replay --verify    -> {verdict} ({report.events} events)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m governed_memory.demo", description=__doc__)
    parser.add_argument("--data-dir", default="./gmem-data", help="where the store lives")
    args = parser.parse_args(argv)
    try:
        service = open_service(data_dir=args.data_dir)
        try:
            walkthrough(service)
        finally:
            service.store.close()
    except GovernedMemoryError as error:
        print(f"error: {error.detail}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
