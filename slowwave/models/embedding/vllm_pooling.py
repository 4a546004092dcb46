"""vLLM's pooling runner as an embedding runtime (same model folder as sentence-transformers)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from slowwave.models.embedding.base import Vectors
from slowwave.models.embedding.sentence_transformer import resolve_model_path


class VLLMEmbedder:
    """An ``Embedder`` backed by ``LLM(runner="pooling")``."""

    def __init__(self, reference: str, *, dtype: str = "float32") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
        from vllm import LLM

        self.name = reference
        self.query_prefix = ""  # queries are embedded as they are
        path = resolve_model_path(reference)
        self._llm: Any = LLM(model=str(path), runner="pooling", enforce_eager=True, dtype=dtype)
        self.dim = len(self._llm.embed(["dimension probe"], use_tqdm=False)[0].outputs.embedding)

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        outputs = self._llm.embed(list(texts), use_tqdm=False)
        vectors = np.asarray([o.outputs.embedding for o in outputs], dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def close(self) -> None:
        self._llm = None
