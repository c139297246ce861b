"""Export records of keys: a subject or item key as a JSON-ready record, and back.

A key's ids are text, its bytes (key id, wrapped key) base64; every field is checked on
the way back in.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from governed_memory.core import values
from governed_memory.errors import ValidationError
from governed_memory.records import ItemKey, SubjectKey

K = TypeVar("K", SubjectKey, ItemKey)


#: How the text fields of a key record are checked when it is imported.
_KEY_FIELDS: dict[str, Callable[[object], str]] = {
    "tenant_id": values.tenant_id,
    "subject_id": values.subject_id,
    "memory_id": values.memory_id,
}


def key_record(record: str, key: SubjectKey | ItemKey) -> dict[str, Any]:
    """A key as an export record: its ids as text, its bytes in base64."""
    fields = dataclasses.asdict(key)
    return {"record": record} | {
        name: base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value
        for name, value in fields.items()
    }


def key_from(cls: type[K], data: dict[str, Any]) -> K:
    """The key an export record holds, every field checked; ``ValidationError`` if not."""
    try:
        values_of: dict[str, Any] = {
            f.name: _KEY_FIELDS[f.name](data[f.name])
            if f.name in _KEY_FIELDS
            else base64.b64decode(data[f.name], validate=True)
            for f in dataclasses.fields(cls)
        }
    except (KeyError, TypeError, binascii.Error) as error:
        name = cls.__name__.replace("Key", " key").lower()
        raise ValidationError(f"malformed {name} record: {type(error).__name__}") from None
    return cls(**values_of)


__all__ = ["key_from", "key_record"]
