"""Checking an export before ``gmem import`` writes any of it.

Every record must decode, every key must unwrap (a subject key under this master key, an
item key under its subject's key), event positions must strictly increase and each
tenant's hash chain must be unbroken (:mod:`.chain_export`). And nothing the store keeps
once may come twice: a second subject key of one (tenant, subject), a second item key of
one (tenant, memory id), a second event with one event id, a second API key with one id or
a second idempotency record of one (tenant, credential, key) is refused, naming its line,
before anything is written (the store would refuse it only after the events before it were
committed, leaving a half-written store no import can be retried into).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable
from typing import IO, Any

from governed_memory.codec import CodecError, stored_from_json
from governed_memory.errors import CryptoError, ValidationError
from governed_memory.records import ItemKey, SubjectKey
from governed_memory.service.carried import api_key_from, idempotency_from
from governed_memory.service.chain_export import ExportChain
from governed_memory.service.keyrecords import key_from
from governed_memory.service.vault import Vault

#: What a record is refused for, besides its own ValidationError.
_BAD = (ValueError, TypeError, KeyError, CodecError, CryptoError, ValidationError)


class _Duplicate(Exception):
    """A record names what an earlier record of the export already named (the message
    says what: ids only, never content)."""


class ExportCheck:
    """Checks the records of one export, in order (:meth:`into` a spool)."""

    def __init__(self, vault: Vault) -> None:
        self._vault = vault
        self._last = 0
        self._subjects: dict[tuple[str, str], SubjectKey] = {}
        self._seen: dict[str, set[Hashable]] = {}
        self._chain = ExportChain()

    def into(self, lines: Iterable[str], spool: IO[str]) -> int:
        """Check every record; copy the valid ones to ``spool``; raise on the first bad
        one, naming its line; how many records it copied."""
        copied = 0
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                self._check(data)
            except _Duplicate as error:
                raise ValidationError(f"line {number} repeats {error}") from None
            except _BAD as error:
                detail = error.detail if isinstance(error, CryptoError) else type(error).__name__
                raise ValidationError(
                    f"line {number} is not a valid export record ({detail})"
                ) from None
            if data["record"] == "event":
                self._chain.follow(number, data)  # each tenant's hash chain, unbroken
            spool.write(line.rstrip("\n") + "\n")
            copied += 1
        return copied

    def _check(self, data: object) -> None:
        """Raise unless ``data`` is a valid record that follows the ones before it."""
        if not isinstance(data, dict):
            raise TypeError
        record = data.get("record")
        body = {k: v for k, v in data.items() if k != "record"}
        if record == "subject_key":
            key = key_from(SubjectKey, body)
            self._vault.check_wrapped(key)  # the master key must match
            self._once("the subject key of a subject", (key.tenant_id, key.subject_id))
            self._subjects[(key.tenant_id, key.subject_id)] = key
        elif record == "item_key":
            self._check_item_key(key_from(ItemKey, body))
        elif record == "api_key":
            self._once("the id of an API key", api_key_from(body).key_id)
        elif record == "idempotency":
            kept = idempotency_from(body)
            what = "an idempotency key of a credential"
            self._once(what, (kept.tenant_id, kept.credential, kept.key))
        elif record == "event":
            self._check_event(body)
        else:
            raise TypeError

    def _check_item_key(self, item: ItemKey) -> None:
        subject = self._subjects.get((item.tenant_id, item.subject_id))
        if subject is None:
            raise ValidationError("an item key without its subject's key")
        self._vault.check_item_key(subject, item)
        self._once("the item key of an item", (item.tenant_id, item.memory_id))

    def _check_event(self, body: dict[str, Any]) -> None:
        stored = stored_from_json(body)
        if stored.position <= self._last:
            raise ValueError
        self._last = stored.position
        self._once("the id of an event", stored.event.event_id)

    def _once(self, what: str, identity: Hashable) -> None:
        """Remember ``identity`` of its kind (``what``); a :class:`_Duplicate` if it was
        met before."""
        seen = self._seen.setdefault(what, set())
        if identity in seen:
            raise _Duplicate(f"{what} named on an earlier line")
        seen.add(identity)


__all__ = ["ExportCheck"]
