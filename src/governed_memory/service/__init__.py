"""The service layer: :class:`MemoryService`, the one object every adapter talks to.

Result types live in :mod:`governed_memory.results`; the collaborators of the service
(vault, idempotency, retrieval, audit, maintenance) are internal to this package.
"""

from governed_memory.service.memory_service import MemoryService

__all__ = ["MemoryService"]
