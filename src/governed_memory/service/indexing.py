"""What the search index is built with, and the index entries and queries built with it.

:class:`SearchSettings` names the analyzer of each tenant (one language for the service,
optionally another for some tenants) and the embedder of semantic recall, if it is on.
Its :attr:`~SearchSettings.signature` is recorded in the store (:data:`SEARCH_INDEX`): an
index holds the terms and vectors of one configuration, and a service with another one
must not read or write it (:func:`check_index`); ``gmem reindex`` rebuilds it.

:class:`Indexer` turns content into an item's index entry (keyed term hashes and, with
semantic recall, the item's vector sealed like its content) and a query into what a
search looks up, under those settings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from governed_memory.analysis import Analyzer
from governed_memory.core.model import ItemState
from governed_memory.crypto import SealingKey
from governed_memory.errors import ConfigError, CryptoError
from governed_memory.ports import Embedder, StoreMeta
from governed_memory.records import REBUILDING, SEARCH_INDEX, IndexDoc, ItemChange
from governed_memory.service._support import Indexing
from governed_memory.service.vault import Vault

#: Texts embedded together when many are indexed at once (a rebuild).
EMBED_BATCH = 32


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """The analyzer of every tenant, and the embedder when semantic recall is on."""

    analyzer: Analyzer = field(default_factory=Analyzer)
    tenants: Mapping[str, Analyzer] = field(default_factory=dict)
    embedder: Embedder | None = None

    def __post_init__(self) -> None:
        # A tenant with the service's own analyzer is no exception: one signature per
        # configuration, however it is written.
        same = {t: a for t, a in self.tenants.items() if a != self.analyzer}
        object.__setattr__(self, "tenants", dict(sorted(same.items())))

    def analyzer_for(self, tenant: str) -> Analyzer:
        return self.tenants.get(tenant, self.analyzer)

    @property
    def signature(self) -> str:
        """What the index holds, in one line: ``analyzer=english/1;embedder=off``."""
        parts = [f"analyzer={_name(self.analyzer)}"]
        if self.tenants:
            parts.append("tenants=" + ",".join(f"{t}:{_name(a)}" for t, a in self.tenants.items()))
        embedder = self.embedder
        parts.append(
            "embedder=off"
            if embedder is None
            else f"embedder={embedder.name}/{embedder.dimensions}"
        )
        return ";".join(parts)


def _name(analyzer: Analyzer) -> str:
    return f"{analyzer.language}/{analyzer.version}"


def check_index(meta: StoreMeta, settings: SearchSettings, *, empty: bool) -> None:
    """Refuse (``ConfigError``) a store whose index was built with other settings.

    An ``empty`` store (no event logged) records these settings, unless another instance
    recorded its own first (the first claim wins, on every instance of one database). A
    store with events but no recorded settings was indexed before they were recorded.
    """
    wanted = settings.signature
    stored = meta.meta(SEARCH_INDEX)
    if stored is None and empty:
        stored = meta.claim_meta(SEARCH_INDEX, wanted)
    if stored == wanted:
        return
    if stored is None:
        found = "records no analyzer (it was built before analyzers were recorded)"
    elif stored.startswith(REBUILDING):
        found = "is being rebuilt, or its rebuild was interrupted"
    else:
        found = f"was built with {stored}"
    raise ConfigError(
        f"the search index of this store {found}, not {wanted}: run `gmem reindex` with "
        "these settings (docs/operations.md)"
    )


@dataclass(frozen=True, slots=True)
class Query:
    """What a search looks up: the query's keyed term ids, and its vector when on."""

    terms: list[int]
    vector: list[float] | None = None


class Indexer:
    """Index entries and queries under one service's search settings."""

    def __init__(self, vault: Vault, settings: SearchSettings) -> None:
        self._vault = vault
        self.settings = settings
        self.signature = settings.signature

    def entry(self, tenant: str, content: str, key: SealingKey | None) -> Indexing:
        """What makes the index entry of an item with ``content`` once it is searchable
        (``key``: the key that seals its content, and so its vector; ``None``: looked up if
        a vector is to be sealed)."""
        return lambda item: self.docs(tenant, [(content, key, item)])[0]

    def signature_of(self, rows: Sequence[ItemChange]) -> str | None:
        """The signature a batch of ``rows`` must be committed under (if it indexes)."""
        return self.signature if any(row.index is not None for row in rows) else None

    def docs(
        self, tenant: str, items: Sequence[tuple[str, SealingKey | None, ItemState]]
    ) -> list[IndexDoc]:
        """The index entries of searchable items of a tenant, given (content, the key that
        sealed it or ``None`` to look it up, the item) each; their vectors are embedded
        together and sealed like the content, for its version."""
        analyzer = self.settings.analyzer_for(tenant)
        entries = [self._vault.index_doc(tenant, analyzer, content) for content, *_ in items]
        embedder = self.settings.embedder
        if embedder is None:
            return entries
        for start in range(0, len(items), EMBED_BATCH):
            chunk = items[start : start + EMBED_BATCH]
            vectors = embedder.embed([content for content, *_ in chunk])
            for offset, ((_, key, item), vector) in enumerate(zip(chunk, vectors, strict=True)):
                key = key or self._vault.content_key(item)
                if key is None:
                    raise CryptoError(f"memory {item.id!r}: no key left to seal its vector")
                sealed = self._vault.seal_vector(key, item.content_version, unit(vector, embedder))
                entry = entries[start + offset]
                entries[start + offset] = IndexDoc(entry.terms, entry.length, sealed)
        return entries

    def query(self, tenant: str, text: str) -> Query:
        """The keyed terms of a query (none: nothing to look up) and, when on, its vector."""
        words = self.settings.analyzer_for(tenant).query_terms(text)
        terms = self._vault.term_ids(tenant, words)
        embedder = self.settings.embedder
        if embedder is None or not terms:
            return Query(terms)
        return Query(terms, unit(embedder.embed([text])[0], embedder))


def unit(vector: Sequence[float], embedder: Embedder) -> list[float]:
    """``vector`` scaled to length 1 (so a dot product is the cosine), checked for size."""
    if len(vector) != embedder.dimensions or not all(math.isfinite(x) for x in vector):
        raise ValueError(
            f"embedder {embedder.name!r} gave a vector that is not {embedder.dimensions} "
            "finite numbers"
        )
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else [0.0] * len(vector)


__all__ = ["Indexer", "Query", "SearchSettings", "check_index", "unit"]
