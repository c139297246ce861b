"""Token counting (SPEC §6.3): cl100k_base exactly, its tables built only when counted."""

from __future__ import annotations

import base64
import gzip
from importlib import resources

import pytest

from governed_memory import tokens
from governed_memory.crypto import Keyring
from governed_memory.errors import ConfigError
from governed_memory.service import MemoryService
from governed_memory.store.memory import MemoryStore
from governed_memory.tokens import Cl100kTokenizer, EstimateTokenizer, default_tokenizer
from tests.support.fakes import FakeClock, body, principal, query


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hello world", 2),  # [15339, 1917]
        ("tiktoken is great!", 6),  # [83, 1609, 5963, 374, 2294, 0]
        ("Grüße aus Köln 日本語", 10),
        ("", 1),  # every text costs at least one token
    ],
)
def test_cl100k_counts_the_tokens_openai_s_encoder_gives(text: str, expected: int) -> None:
    assert Cl100kTokenizer().count(text) == expected


def test_text_that_looks_like_a_special_token_counts_as_ordinary_text() -> None:
    """``<|endoftext|>`` in a memory is seven ordinary tokens, never one special token."""
    assert Cl100kTokenizer().count("<|endoftext|>") == 7


def test_a_fresh_tokenizer_holds_no_tables_until_it_counts() -> None:
    tokenizer = Cl100kTokenizer()
    assert not tokenizer.loaded
    tokenizer.count("hello")
    assert tokenizer.loaded


def test_the_default_tokenizer_is_cl100k_and_names_itself_without_loading() -> None:
    tokenizer = default_tokenizer()
    assert isinstance(tokenizer, Cl100kTokenizer)
    assert tokenizer.name == "cl100k_base"
    assert not tokenizer.loaded


def test_a_service_that_only_searches_never_builds_the_tables(
    keyring: Keyring, clock: FakeClock
) -> None:
    tokenizer = Cl100kTokenizer()
    service = MemoryService(MemoryStore(), keyring, clock=clock, tokenizer=tokenizer)
    found = service.search(principal(), query("coffee"))
    assert found.tokenizer == "cl100k_base"
    assert not tokenizer.loaded
    service.write(principal(), body(content="Prefers dark roast coffee."))
    assert tokenizer.loaded


def test_a_damaged_vocabulary_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "CL100K_SHA256", "0" * 64)
    with pytest.raises(ConfigError, match="damaged"):
        Cl100kTokenizer().count("hello")


def test_the_vocabulary_is_read_exactly_line_by_line() -> None:
    """Every token and rank of the shipped file, as a line-by-line reading of it gives."""
    raw = gzip.decompress(
        resources.files("governed_memory").joinpath("vocab", tokens.CL100K_FILE).read_bytes()
    )
    expected = {}
    for line in raw.splitlines():
        token, rank = line.split(b" ")
        expected[base64.b64decode(token, validate=True)] = int(rank)
    ranks = tokens._cl100k_ranks()
    assert ranks == expected
    assert list(ranks.items()) == list(expected.items())  # in the file's order too
    assert len(ranks) == 100_256


def test_without_tiktoken_the_documented_estimate_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens.importlib.util, "find_spec", lambda name: None)
    tokenizer = default_tokenizer()
    assert isinstance(tokenizer, EstimateTokenizer)
    assert tokenizer.count("x" * 9) == 3
