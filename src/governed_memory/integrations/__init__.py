"""Optional integrations with agent frameworks, each behind its own extra.

An integration is an adapter of the service like the client: it talks to a
:class:`~governed_memory.service.MemoryService` in process or to the HTTP API through
:mod:`governed_memory.client`, and holds no rule of its own.
"""
