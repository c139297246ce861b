"""The Python client of the governed-memory HTTP API: :class:`Client` and :class:`AsyncClient`.

Both return the library's own values (:class:`~governed_memory.MemoryItem`,
:class:`~governed_memory.WriteResult`, :class:`~governed_memory.SearchResult`…) and raise the
library's own exceptions, mapped from each problem's ``type``, so code written against
:class:`~governed_memory.MemoryService` works over HTTP. See ``docs/client.md``.
"""

from governed_memory.client._async import AsyncClient
from governed_memory.client._config import API_KEY_VARIABLE, DEFAULT_URL, URL_VARIABLE
from governed_memory.client._retry import RetryPolicy
from governed_memory.client._sync import Client

__all__ = [
    "API_KEY_VARIABLE",
    "DEFAULT_URL",
    "URL_VARIABLE",
    "AsyncClient",
    "Client",
    "RetryPolicy",
]
