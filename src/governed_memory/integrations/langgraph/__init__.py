"""A LangGraph ``BaseStore`` over governed memory (the ``langgraph`` extra).

:class:`GovernedStore` gives LangGraph agents and LangMem's memory tools a store whose
puts are governed writes: an agent's write waits in quarantine until a reviewer
promotes it, a rewrite carries the version it replaces, a delete is an erasure on the
record. How namespaces, keys and values map, and where the semantics differ from
LangGraph's own stores: ``docs/integrations.md``.
"""

from governed_memory.integrations.langgraph.backends import Backend, ClientBackend, ServiceBackend
from governed_memory.integrations.langgraph.mapping import ItemFields, NamespaceMap
from governed_memory.integrations.langgraph.operations import IdTaken
from governed_memory.integrations.langgraph.store import GovernedStore

__all__ = [
    "Backend",
    "ClientBackend",
    "GovernedStore",
    "IdTaken",
    "ItemFields",
    "NamespaceMap",
    "ServiceBackend",
]
