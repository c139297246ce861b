"""governed-memory: long-term memory for AI agents in which a memory must earn its place.

The library API is :class:`MemoryService`, opened with :func:`open_service`; every call
takes the acting :class:`Principal`.
"""

from governed_memory._version import __version__ as __version__
from governed_memory.apikeys import create_api_key
from governed_memory.client import AsyncClient, Client
from governed_memory.core.commands import WriteMemory
from governed_memory.core.model import MemoryItem, Principal
from governed_memory.core.policy import KindPolicy, TtlPolicy
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
from governed_memory.factory import open_service, open_store
from governed_memory.records import ApiKey
from governed_memory.results import (
    AuditEvent,
    ForgetResult,
    QuarantinePage,
    ReplayReport,
    SearchHit,
    SearchResult,
    WriteResult,
)
from governed_memory.service import MemoryService

__all__ = [
    "ApiKey",
    "AsyncClient",
    "AuditEvent",
    "AuthenticationError",
    "Client",
    "Conflict",
    "FieldError",
    "ForgetResult",
    "GovernedMemoryError",
    "IdempotencyKeyReused",
    "InvalidTransition",
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
