"""Token counting for the retrieval budget (SPEC §6.3).

The real tokenizer is OpenAI's ``cl100k_base``, taken from ``bpe-openai`` (a
tiktoken-compatible encoder that ships its vocabulary inside the package, so it works on
machines without network access). If that package cannot be loaded, the documented
estimate is used instead: one token per 4 UTF-8 bytes, rounded up, at least 1 per text.
Search results name the tokenizer that counted them.
"""

from __future__ import annotations

import math
from typing import Protocol


class Tokenizer(Protocol):
    """Counts the tokens a text costs in a model's context window."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


class EstimateTokenizer:
    """The fallback estimate: ceil(UTF-8 bytes / 4), at least 1."""

    name = "estimate:utf8_bytes/4"

    def count(self, text: str) -> int:
        return max(1, math.ceil(len(text.encode("utf-8")) / 4))


class Cl100kTokenizer:
    """OpenAI's cl100k_base, exactly, without network access."""

    name = "cl100k_base"

    def __init__(self) -> None:
        import bpe_openai

        self._encoding = bpe_openai.get_encoding("cl100k_base")

    def count(self, text: str) -> int:
        return max(1, len(self._encoding.encode(text, disallowed_special=())))


def default_tokenizer() -> Tokenizer:
    """cl100k_base when available offline, else the documented estimate."""
    try:
        return Cl100kTokenizer()
    except Exception:  # noqa: BLE001 - any failure to load the vocabulary means: estimate
        return EstimateTokenizer()
