"""The one interface every embedding runtime implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from slowwave.models.errors import EmbeddingDimensionMismatch

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors, in batches."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Vectors:
        """An array of shape (len(texts), dim), each row of unit length."""
        ...

    def close(self) -> None: ...


def as_queries(embedder: Embedder, texts: Sequence[str]) -> list[str]:
    """A search's queries as the model wants them: behind its query prefix, where it has one
    (bge: "Represent this sentence for searching relevant passages: "); what is stored is
    embedded as it is."""
    prefix = getattr(embedder, "query_prefix", "")
    return [prefix + text for text in texts] if prefix else list(texts)


def check_dimension(embedder: Embedder, schema_dim: int) -> None:
    """A clear error before any work when the model does not fit the schema."""
    if embedder.dim != schema_dim:
        raise EmbeddingDimensionMismatch(
            f"embedding model {embedder.name} makes {embedder.dim}-dimensional vectors but "
            f"the schema stores {schema_dim} (SLOWWAVE_EMBEDDING_DIM); use a matching model "
            "or a database migrated for that dimension"
        )
