"""governed-memory: long-term memory for AI agents in which a memory must earn its place.

The library API is :class:`MemoryService`, opened with :func:`open_service`; every call
takes the acting :class:`Principal`. :class:`Client` and :class:`AsyncClient` speak to a
running service over HTTP with the same values and errors.

Every name is imported on its first use (PEP 562, :data:`_LAZY`), so importing a part of
the package loads that part only: ``import governed_memory.client`` loads no store, no
service and no ``cryptography``, and a rebuild's checking worker (``store/sqlite/
checker.py``) starts without the service, the commands and the results it does not use.
A submodule is an attribute of the package once it is imported, as in any package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governed_memory import _lazy
from governed_memory._version import __version__ as __version__

if TYPE_CHECKING:
    from governed_memory.apikeys import create_api_key
    from governed_memory.bootstrap import open_service, open_store
    from governed_memory.client import AsyncClient, Client
    from governed_memory.core.commands import WriteMemory
    from governed_memory.core.model import MemoryItem, Principal
    from governed_memory.core.policy import KindPolicy, RetentionPolicy, TtlPolicy
    from governed_memory.core.retrieval import SearchQuery
    from governed_memory.core.values import Kind, Provenance, Scope, Status, Trust
    from governed_memory.crypto import Keyring
    from governed_memory.errors import (
        AuthenticationError,
        Conflict,
        FieldError,
        GovernedMemoryError,
        IdempotencyKeyReused,
        InvalidTransition,
        NotFound,
        PayloadTooLarge,
        PermissionDenied,
        RateLimited,
        SelfPromotion,
        StoreUnavailable,
        ValidationError,
        VersionConflict,
    )
    from governed_memory.records import ApiKey
    from governed_memory.results import (
        AuditEvent,
        EraseResult,
        ForgetResult,
        ItemPage,
        QuarantinePage,
        ReplayReport,
        SearchHit,
        SearchResult,
        WriteResult,
    )
    from governed_memory.service import MemoryService

_ERRORS = (
    "AuthenticationError",
    "Conflict",
    "FieldError",
    "GovernedMemoryError",
    "IdempotencyKeyReused",
    "InvalidTransition",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "RateLimited",
    "SelfPromotion",
    "StoreUnavailable",
    "ValidationError",
    "VersionConflict",
)
_RESULTS = (
    "AuditEvent",
    "EraseResult",
    "ForgetResult",
    "ItemPage",
    "QuarantinePage",
    "ReplayReport",
    "SearchHit",
    "SearchResult",
    "WriteResult",
)
#: Where each public name is defined, imported on its first use.
_LAZY = {
    "ApiKey": "governed_memory.records",
    "AsyncClient": "governed_memory.client",
    "Client": "governed_memory.client",
    "Keyring": "governed_memory.crypto",
    "Kind": "governed_memory.core.values",
    "KindPolicy": "governed_memory.core.policy",
    "MemoryItem": "governed_memory.core.model",
    "MemoryService": "governed_memory.service",
    "Principal": "governed_memory.core.model",
    "Provenance": "governed_memory.core.values",
    "RetentionPolicy": "governed_memory.core.policy",
    "Scope": "governed_memory.core.values",
    "SearchQuery": "governed_memory.core.retrieval",
    "Status": "governed_memory.core.values",
    "Trust": "governed_memory.core.values",
    "TtlPolicy": "governed_memory.core.policy",
    "WriteMemory": "governed_memory.core.commands",
    "create_api_key": "governed_memory.apikeys",
    "open_service": "governed_memory.bootstrap",
    "open_store": "governed_memory.bootstrap",
    **dict.fromkeys(_ERRORS, "governed_memory.errors"),
    **dict.fromkeys(_RESULTS, "governed_memory.results"),
}


def __getattr__(name: str) -> object:
    return _lazy.load(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return _lazy.listed(__name__, _LAZY)


__all__ = [
    "ApiKey",
    "AsyncClient",
    "AuditEvent",
    "AuthenticationError",
    "Client",
    "Conflict",
    "EraseResult",
    "FieldError",
    "ForgetResult",
    "GovernedMemoryError",
    "IdempotencyKeyReused",
    "InvalidTransition",
    "ItemPage",
    "Keyring",
    "Kind",
    "KindPolicy",
    "MemoryItem",
    "MemoryService",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "Principal",
    "Provenance",
    "QuarantinePage",
    "RateLimited",
    "ReplayReport",
    "RetentionPolicy",
    "Scope",
    "SearchHit",
    "SearchQuery",
    "SearchResult",
    "SelfPromotion",
    "Status",
    "StoreUnavailable",
    "Trust",
    "TtlPolicy",
    "ValidationError",
    "VersionConflict",
    "WriteMemory",
    "WriteResult",
    "create_api_key",
    "open_service",
    "open_store",
]
