"""embed: vectors for every fact a round will write, in one batch (seed 001 step 3)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from slowwave.models.embedding.base import Embedder, Vectors
from slowwave.models.fact import embedding_text
from slowwave.models.plan import Plan


def embed_groups(embedder: Embedder, groups: Sequence[Sequence[str]]) -> list[Vectors]:
    """One batch for the texts of every group; back, one array of rows per group, in order."""
    texts = [t for group in groups for t in group]
    vectors = embedder.embed(texts) if texts else np.zeros((0, embedder.dim), dtype=np.float32)
    out: list[Vectors] = []
    start = 0
    for group in groups:
        out.append(vectors[start : start + len(group)])
        start += len(group)
    return out


def embed_plans(embedder: Embedder, plans: Sequence[Plan]) -> list[Vectors]:
    """Per plan, one row per action that writes a fact, in the plan's action order."""
    return embed_groups(embedder, [fact_texts(p) for p in plans])


def fact_texts(plan: Plan) -> list[str]:
    """What is embedded for each fact the plan writes, in action order."""
    actions = [plan.actions[i] for i in plan.writing]
    return [embedding_text(str(a.category), a.fact or "", a.keywords) for a in actions]


def uncited_texts(plan: Plan) -> list[str]:
    """The sentences of the plan's uncited actions that write no fact (reinforce, invalidate),
    in action order: what evidence attribution embeds for them."""
    return [a.fact or "" for a in plan.actions if not a.cited and not a.writes_fact and a.fact]


def embed_uncited(embedder: Embedder, plans: Sequence[Plan]) -> list[Vectors]:
    """Per plan, one row per text of ``uncited_texts``, embedded as one batch."""
    return embed_groups(embedder, [uncited_texts(p) for p in plans])
