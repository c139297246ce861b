"""Token counting for the retrieval budget (SPEC §6.3).

The real tokenizer is OpenAI's ``cl100k_base`` run by ``tiktoken``, OpenAI's own encoder,
with the vocabulary shipped in this package (``governed_memory/vocab``, checked against
its published SHA-256), so it works on machines without network access. The tables are
built on the first count, not when the service opens: a process that only searches never
holds them (about 30 MiB). If ``tiktoken`` is not installed, the documented estimate is
used instead: one token per 4 UTF-8 bytes, rounded up, at least 1 per text. Search results
name the tokenizer that counted them.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import importlib.util
import math
import threading
from importlib import resources
from typing import Any, Protocol

from governed_memory.errors import ConfigError

#: The vocabulary file and the SHA-256 OpenAI publishes for it (uncompressed).
CL100K_FILE = "cl100k_base.tiktoken.gz"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
    r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
CL100K_SPECIAL = {
    "<|endoftext|>": 100_257,
    "<|fim_prefix|>": 100_258,
    "<|fim_middle|>": 100_259,
    "<|fim_suffix|>": 100_260,
    "<|endofprompt|>": 100_276,
}


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


def _cl100k_ranks() -> dict[bytes, int]:
    """The shipped vocabulary, refused unless it is exactly the published one.

    Each line is a token in base64, a space and its rank; the SHA-256 has vouched for every
    byte of them, so the file is read as a whole, in C loops (a Python loop over its
    100,256 lines, holding the GIL on every process's first count, took 1.4× as long)."""
    packed = resources.files("governed_memory").joinpath("vocab", CL100K_FILE).read_bytes()
    raw = gzip.decompress(packed)
    if hashlib.sha256(raw).hexdigest() != CL100K_SHA256:
        raise ConfigError(f"the shipped tokenizer vocabulary {CL100K_FILE} is damaged")
    fields = iter(raw.split())  # token, rank, token, rank, …: zip pairs them in turn
    return dict(zip(map(binascii.a2b_base64, fields), map(int, fields)))  # noqa: B905


class Cl100kTokenizer:
    """OpenAI's cl100k_base, exactly, without network access; its tables are built on the
    first :meth:`count` (once, whichever thread asks first)."""

    name = "cl100k_base"

    def __init__(self) -> None:
        self._encoding: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._encoding is None:
                import tiktoken

                self._encoding = tiktoken.Encoding(
                    "cl100k_base",
                    pat_str=CL100K_PATTERN,
                    mergeable_ranks=_cl100k_ranks(),
                    special_tokens=CL100K_SPECIAL,
                )
            return self._encoding

    @property
    def loaded(self) -> bool:
        """Whether the tables are built (a fresh tokenizer holds none)."""
        return self._encoding is not None

    def count(self, text: str) -> int:
        encoding = self._encoding if self._encoding is not None else self._load()
        # encode_ordinary: text that looks like a special token counts as ordinary text.
        return max(1, len(encoding.encode_ordinary(text)))


def default_tokenizer() -> Tokenizer:
    """cl100k_base when ``tiktoken`` is installed (loaded on first use), else the estimate."""
    if importlib.util.find_spec("tiktoken") is None:
        return EstimateTokenizer()
    return Cl100kTokenizer()
