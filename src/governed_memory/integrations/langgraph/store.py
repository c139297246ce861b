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
#: Labels whose keyed hashes under a tenant's search-term key make its default key secret
#: (4 x 64 bits); no analyzer emits a word holding a NUL, so none is ever a stored term.
SECRET_LABELS = tuple(f"\x00gmem/langgraph/key-secret/{part}" for part in range(4))


def tenant_secret(service: MemoryService, tenant_id: str) -> bytes:
    """The tenant's default key secret: a keyed hash under a key derived from the service's
    master key, so every process of the service computes it and nobody without the master
    key can."""
    parts = service.keyring.term_ids(tenant_id, list(SECRET_LABELS))
    return b"".join(part.to_bytes(8, "big", signed=True) for part in parts)


class GovernedStore(BaseStore):
    """A LangGraph store whose items are governed memories.

    ``namespaces`` maps a namespace to (agent, purpose, subject); ``fields`` gives a put's
    kind, trust, confidence and provenance (an :class:`ItemFields`, or a function of the
    namespace, key and value returning one); ``key_secret`` (bytes, at least 16) keys the
    digest of memory ids: every store of the same memories needs the same one. Open one with
    :meth:`in_process` (the secret defaults to one the service derives for the tenant) or
    :meth:`over_http` (the secret is required). Errors of the service (a
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
        key_secret: bytes,
        ttl_config: TTLConfig | None = None,
    ) -> None:
        self.backend = backend
        self.ttl_config = ttl_config
        self._operations = Operations(backend, Settings(namespaces, fields, key_secret))

    @classmethod
    def in_process(
        cls,
        service: MemoryService,
        principal: Principal,
        *,
        key_secret: bytes | None = None,
        **options: Any,
    ) -> GovernedStore:
        """A store over a service in this process, acting as ``principal``; without a
        ``key_secret``, the tenant's own, derived from the service's master key."""
        if key_secret is None:
            key_secret = tenant_secret(service, principal.tenant_id)
        return cls(ServiceBackend(service, principal), key_secret=key_secret, **options)

    @classmethod
    def over_http(
        cls, client: Client, *, key_secret: bytes | None = None, **options: Any
    ) -> GovernedStore:
        """A store over the HTTP API, acting as the client's API key; ``key_secret`` is
        required (the client holds no master key to derive one from)."""
        if key_secret is None:
            raise ValueError(
                "over HTTP the store needs key_secret: bytes of at least 16, the same for "
                "every store of these memories (e.g. secrets.token_bytes(32), kept as a secret)"
            )
        return cls(ClientBackend(client), key_secret=key_secret, **options)

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
