"""Embedding runtimes behind one interface (``base.Embedder``)."""

from __future__ import annotations

from models.embedding.base import Embedder, EmbeddingDimensionMismatch, check_dimension
from slowwave.settings import Settings

__all__ = ["Embedder", "EmbeddingDimensionMismatch", "check_dimension", "load_embedder"]


def load_embedder(settings: Settings) -> Embedder:
    """The configured embedding model, checked against the schema's dimension."""
    from models.embedding.sentence_transformer import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(
        settings.embedding_model,
        device=settings.embedding_device,
        batch_size=settings.embedding_batch_size,
    )
    check_dimension(embedder, settings.embedding_dim)
    return embedder
