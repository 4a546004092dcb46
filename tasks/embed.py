"""embed: vectors for every fact a round will write, in one batch (seed 001 step 3)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models.embedding.base import Embedder, Vectors
from models.fact import embedding_text
from models.plan import Plan


def embed_plans(embedder: Embedder, plans: Sequence[Plan]) -> list[Vectors]:
    """Per plan, one row per action that writes a fact, in the plan's action order."""
    texts: list[str] = []
    counts: list[int] = []
    for plan in plans:
        writing = [a for a in plan.actions if a.writes_fact]
        counts.append(len(writing))
        texts += [embedding_text(str(a.category), a.fact or "", a.keywords) for a in writing]
    vectors = embedder.embed(texts) if texts else np.zeros((0, embedder.dim), dtype=np.float32)
    out: list[Vectors] = []
    start = 0
    for count in counts:
        out.append(vectors[start : start + count])
        start += count
    return out
