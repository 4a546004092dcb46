"""Embedding runtimes behind one interface (``base.Embedder``), in process or on Ray."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from slowwave.models.embedding.base import Embedder, Vectors, as_queries, check_dimension
from slowwave.models.errors import EmbeddingDimensionMismatch
from slowwave.models.settings import Settings

__all__ = [
    "Embedder",
    "EmbeddingDimensionMismatch",
    "RayEmbedder",
    "as_queries",
    "check_dimension",
    "load_embedder",
]


def embedder_factory(settings: Settings) -> partial[Any]:
    """A picklable constructor of the configured runtime (for this process or an actor)."""
    if settings.embedding.runtime == "onnx":
        from slowwave.models.embedding.catalog import EMBEDDING_CATALOG
        from slowwave.models.embedding.onnx import OnnxEmbedder
        from slowwave.models.embedding.weights import onnx_model_dir

        reference = settings.embedding.model
        spec = EMBEDDING_CATALOG.get(reference)
        return partial(
            OnnxEmbedder,
            onnx_model_dir(settings.home, reference),
            name=reference,
            query_prefix=spec.query_prefix if spec else "",
            max_tokens=spec.max_tokens if spec else 512,
        )
    options: dict[str, Any] = {
        "device": settings.embedding.device,
        "batch_size": settings.embedding.batch_size,
        "dtype": settings.embedding.dtype,
    }
    if settings.embedding.runtime == "auto":
        return partial(auto_embedder, settings.home, settings.embedding.model, options)
    if settings.embedding.runtime == "vllm":
        from slowwave.models.embedding.vllm_pooling import VLLMEmbedder

        return partial(VLLMEmbedder, settings.embedding.model, dtype=settings.embedding.dtype)
    from slowwave.models.embedding.sentence_transformer import SentenceTransformerEmbedder

    return partial(SentenceTransformerEmbedder, settings.embedding.model, **options)


def auto_embedder(home: Path, reference: str, options: dict[str, Any]) -> Embedder:
    """The ``auto`` runtime, decided where the model is loaded (an actor on another machine
    looks in its own home): the package's ONNX export on the CPU in float32 where `slowwave
    models setup` made one (``models.embedding.export``), else sentence-transformers (a GPU,
    bfloat16, a local directory, or no export)."""
    from slowwave.models.embedding.export import exportable, exported_model, read_manifest

    on_cpu = options.get("device", "cpu") == "cpu" and options.get("dtype", "float32") == "float32"
    folder = exported_model(home, reference) if on_cpu and exportable(reference) else None
    if folder is not None:
        from slowwave.models.embedding.onnx import OnnxEmbedder

        manifest = read_manifest(folder)
        return OnnxEmbedder(
            folder, name=reference, max_tokens=manifest["max_tokens"], pooling=manifest["pooling"]
        )
    from slowwave.models.embedding.sentence_transformer import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(reference, **options)


class RayEmbedder:
    """Embedding actors on Ray; a batch is split into one contiguous shard per actor."""

    def __init__(self, settings: Settings) -> None:
        from slowwave.models.workers.pool import ActorPool

        self.pool = ActorPool(
            settings,
            embedder_factory(settings),
            actors_per_node=settings.embedding.actors_per_node,
            cpus_per_actor=settings.embedding.cpus_per_actor,
            use_gpus=settings.embedding.device != "cpu",
            name="embedding",
        )
        self.name = str(self.pool.attribute("name"))
        self.dim = int(self.pool.attribute("dim"))
        self.query_prefix = str(self.pool.attribute("query_prefix"))

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = self.pool.map("embed", list(texts))
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack(rows).astype(np.float32, copy=False)

    def close(self) -> None:
        self.pool.close()


def load_embedder(settings: Settings) -> Embedder:
    """The configured embedding model, checked against the schema's dimension."""
    embedder: Embedder
    if settings.embedding.actors_per_node > 0:
        embedder = RayEmbedder(settings)
    else:
        embedder = embedder_factory(settings)()
    try:
        check_dimension(embedder, settings.embedding.dim)
    except EmbeddingDimensionMismatch:
        embedder.close()
        raise
    return embedder
