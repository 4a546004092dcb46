"""surprise (seed 000): how much an episode tells the conversation that its facts do not already.

An episode whose source gave no surprise gets its novelty the first time a chunk holding it is
opened: the cosine distance from its gist to the nearest active fact of its conversation, capped
at 1, and 1 where the conversation has no facts yet. Predict already finds that fact, so it
costs no extra query. The value is stored, so a retried chunk sees the same surprise; then the
gate (short and unsurprising: no model call) and deep extraction (surprise at or above
``flashbulb_surprise``) use it like a source's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import psycopg

from slowwave import sql
from slowwave.models.episode import Episode
from slowwave.tasks.predict import Nearest


def novelty(nearest: Nearest) -> float:
    """1 − cosine similarity to the nearest fact, in [0, 1]; 1 with no fact to compare."""
    if not nearest:
        return 1.0
    return min(1.0, max(0.0, nearest[0][0]))


def with_surprise(
    chunks: Sequence[Sequence[Episode]], nearest: Sequence[Sequence[Nearest]]
) -> tuple[list[list[Episode]], dict[UUID, float]]:
    """The chunks with every missing surprise computed, and the computed values by episode
    (to store). An episode split into parts gets one value, its first part's."""
    computed: dict[UUID, float] = {}
    filled = []
    for chunk, per_episode in zip(chunks, nearest, strict=True):
        episodes = []
        for episode, found in zip(chunk, per_episode, strict=True):
            if episode.surprise is None:
                value = computed.setdefault(episode.id, novelty(found))
                episode = episode.model_copy(update={"surprise": value})
            episodes.append(episode)
        filled.append(episodes)
    return filled, computed


def store_surprise(conn: psycopg.Connection, computed: dict[UUID, float]) -> dict[UUID, float]:
    """Keep the computed values for the episodes that still have none; return the value each
    episode keeps (an earlier opening's, when there was one)."""
    if not computed:
        return {}
    rows = conn.execute(
        sql.statement("episode_surprise"),
        {"ids": list(computed), "novelties": list(computed.values())},
    ).fetchall()
    return {row[0]: float(row[1]) for row in rows}


def score_surprise(
    conn: psycopg.Connection,
    chunks: Sequence[Sequence[Episode]],
    nearest: Sequence[Sequence[Nearest]],
) -> list[list[Episode]]:
    """The chunks with every missing surprise filled in with the value stored for it."""
    filled, computed = with_surprise(chunks, nearest)
    kept = store_surprise(conn, computed)
    return [
        [e.model_copy(update={"surprise": kept[e.id]}) if e.id in kept else e for e in chunk]
        for chunk in filled
    ]
