"""The two ways the store reaches governed memory: a service in process, or the HTTP API.

Both answer the same five calls with the library's own values and raise the library's own
errors (the client maps each problem back to its class), so :class:`~.store.GovernedStore`
does not know which one it holds. Who acts is fixed here: the principal of the service
backend, the API key of the client's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from governed_memory.core.model import MemoryItem, Principal
from governed_memory.errors import NotFound
from governed_memory.results import ItemPage, SearchResult

if TYPE_CHECKING:
    from governed_memory.client import Client
    from governed_memory.service import MemoryService

#: The most items one browse call asks for (the HTTP API's ceiling).
PAGE = 500


class Backend(Protocol):
    """What the store needs of governed memory, as one principal."""

    def get(self, memory_id: str) -> MemoryItem | None:
        """The item, ``None`` if this principal cannot see one by that id."""
        ...

    def write(self, memory_id: str, request: dict[str, Any]) -> MemoryItem:
        """Create or rewrite ``memory_id`` (``request`` holds ``expected_version``)."""
        ...

    def erase(self, memory_id: str) -> None:
        """Erase one item: deleted, the content of every version destroyed."""
        ...

    def search(self, request: dict[str, Any]) -> SearchResult:
        """A scoped search (``agent_id``, ``purpose``, ``query``, …)."""
        ...

    def browse(self, filters: dict[str, str | None], cursor: str | None) -> ItemPage:
        """One page of the principal's items passing ``filters`` (agent_id, purpose,
        subject_id, status)."""
        ...


class ServiceBackend:
    """A :class:`~governed_memory.service.MemoryService` in this process, acting as
    ``principal``."""

    def __init__(self, service: MemoryService, principal: Principal) -> None:
        self.service = service
        self.principal = principal

    def get(self, memory_id: str) -> MemoryItem | None:
        try:
            return self.service.get(self.principal, memory_id)
        except NotFound:
            return None

    def write(self, memory_id: str, request: dict[str, Any]) -> MemoryItem:
        return self.service.write(self.principal, request | {"id": memory_id}).item

    def erase(self, memory_id: str) -> None:
        self.service.erase(self.principal, memory_id)

    def search(self, request: dict[str, Any]) -> SearchResult:
        return self.service.search(self.principal, request)

    def browse(self, filters: dict[str, str | None], cursor: str | None) -> ItemPage:
        return self.service.browse(self.principal, **filters, limit=PAGE, cursor=cursor)


class ClientBackend:
    """The HTTP API through a :class:`~governed_memory.client.Client` (its API key acts)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def get(self, memory_id: str) -> MemoryItem | None:
        try:
            return self.client.get(memory_id)
        except NotFound:
            return None

    def write(self, memory_id: str, request: dict[str, Any]) -> MemoryItem:
        fields = dict(request)
        expected = fields.pop("expected_version")
        return self.client.write(memory_id, expected_version=expected, **fields).item

    def erase(self, memory_id: str) -> None:
        self.client.erase(memory_id)

    def search(self, request: dict[str, Any]) -> SearchResult:
        fields = dict(request)
        agent, purpose, query = fields.pop("agent_id"), fields.pop("purpose"), fields.pop("query")
        return self.client.search(agent, purpose, query, **fields)

    def browse(self, filters: dict[str, str | None], cursor: str | None) -> ItemPage:
        return self.client.list(**filters, limit=PAGE, cursor=cursor)
