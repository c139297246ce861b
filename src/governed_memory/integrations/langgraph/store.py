"""``GovernedStore``: LangGraph's ``BaseStore`` over governed memory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from governed_memory.core.model import Principal
from governed_memory.integrations.langgraph.backends import Backend, ClientBackend, ServiceBackend
from governed_memory.integrations.langgraph.mapping import ItemFields, NamespaceMap
from governed_memory.integrations.langgraph.operations import FieldsOf, Operations, Settings

if TYPE_CHECKING:
    from governed_memory.client import Client
    from governed_memory.service import MemoryService


#: Untrusted facts from source ``langgraph``: an agent's writes wait for review.
DEFAULT_FIELDS = ItemFields()


class GovernedStore(BaseStore):
    """A LangGraph store whose items are governed memories.

    ``namespaces`` maps a namespace to (agent, purpose, subject); ``fields`` gives a put's
    kind, trust, confidence and provenance (an :class:`ItemFields`, or a function of the
    namespace, key and value returning one); ``key_secret`` keys the digest of memory ids.
    Open one with :meth:`in_process` or :meth:`over_http`. Errors of the service (a
    version conflict, a refused trust, an invalid field) are raised as they are.
    ``abatch`` runs ``batch`` in a worker thread: the event loop is never blocked.
    """

    supports_ttl = True

    def __init__(
        self,
        backend: Backend,
        *,
        namespaces: NamespaceMap,
        fields: FieldsOf = DEFAULT_FIELDS,
        key_secret: bytes = b"",
        ttl_config: TTLConfig | None = None,
    ) -> None:
        self.backend = backend
        self.ttl_config = ttl_config
        self._operations = Operations(backend, Settings(namespaces, fields, key_secret))

    @classmethod
    def in_process(
        cls, service: MemoryService, principal: Principal, **options: Any
    ) -> GovernedStore:
        """A store over a service in this process, acting as ``principal``."""
        return cls(ServiceBackend(service, principal), **options)

    @classmethod
    def over_http(cls, client: Client, **options: Any) -> GovernedStore:
        """A store over the HTTP API, acting as the client's API key."""
        return cls(ClientBackend(client), **options)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; each one's result at its place."""
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch`, in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        validate_op_namespace(op)
        handlers: Mapping[type, Callable[[Any], Result]] = {
            GetOp: lambda o: self._operations.get(o.namespace, o.key),
            PutOp: self._put,
            SearchOp: self._operations.search,
            ListNamespacesOp: self._operations.list_namespaces,
        }
        return handlers[type(op)](op)

    def _put(self, op: PutOp) -> None:
        if not op.namespace and op.value is not None:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        self._operations.put(op)
