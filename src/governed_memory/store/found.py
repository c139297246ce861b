"""A search's candidates read with their rows and keys (``Store.reads_rows_with_matches``),
shared by the SQL stores: each reads, in the state of its matches, every candidate's item
row followed by its subject's key and its own key (``NULL`` where there is none)."""

from __future__ import annotations

from typing import Any

from governed_memory.codec import ITEM_COLUMNS, item_from_row
from governed_memory.core.model import ItemState
from governed_memory.records import ItemKey, SearchFound, SubjectKey

_KEYS_AT = len(ITEM_COLUMNS)  # where a candidate's keys start, after its row


class Found:
    """The rows and keys of a search's candidates, as they come."""

    def __init__(self, tenant_id: str) -> None:
        self.tenant_id = tenant_id
        self.items: dict[str, ItemState] = {}
        self.subject_keys: dict[str, SubjectKey | None] = {}
        self.item_keys: dict[str, ItemKey | None] = {}

    def add(self, columns: tuple[Any, ...]) -> None:
        """One candidate's row (:data:`~governed_memory.codec.ITEM_COLUMNS`), then its
        subject's key (id, wrapped) and its own (subject, id, wrapped)."""
        item = item_from_row(columns[:_KEYS_AT])
        key_id, wrapped, key_subject, item_key_id, item_wrapped = columns[_KEYS_AT:]
        self.items[item.id] = item
        self.subject_keys[item.subject_id] = (
            None
            if key_id is None
            else SubjectKey(self.tenant_id, item.subject_id, bytes(key_id), bytes(wrapped))
        )
        self.item_keys[item.id] = (
            None
            if item_key_id is None
            else ItemKey(
                self.tenant_id, item.id, key_subject, bytes(item_key_id), bytes(item_wrapped)
            )
        )

    def record(self) -> SearchFound:
        return SearchFound(self.items, self.subject_keys, self.item_keys)


__all__ = ["Found"]
