"""predict: the active facts related to a chunk's episodes, to show the model (seed 001 step 1).

The chunk's episode gists are embedded in one batch (all chunks of a round together), each
episode retrieves the nearest active facts of its own conversation (the nearest one also gives
its surprise, ``tasks/surprise.py``), and the per-episode lists are united by id in rank order
and capped.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg.rows import dict_row

from slowwave import sql
from slowwave.models.embedding.base import Embedder, Vectors
from slowwave.models.episode import Episode
from slowwave.models.fact import Fact
from slowwave.tasks.embed import embed_groups


def episode_vectors(embedder: Embedder, chunks: Sequence[Sequence[Episode]]) -> list[Vectors]:
    """The gist vector of every episode, per chunk, embedded as one batch: predict queries
    with them, and evidence is attributed by them."""
    return embed_groups(embedder, [[e.gist for e in chunk] for chunk in chunks])


Nearest = list[tuple[float, Fact]]  # (cosine distance, fact), nearest first


def nearest_facts(
    conn: psycopg.Connection,
    chunks: Sequence[Sequence[Episode]],
    vectors: Sequence[Vectors],
    limit: int,
) -> list[list[Nearest]]:
    """For each chunk, for each of its episodes, its ``limit`` nearest active facts of its
    conversation; ``vectors`` are the chunks' episode vectors (``episode_vectors``)."""
    found: list[list[Nearest]] = [[[] for _ in chunk] for chunk in chunks]
    queries = [(i, j, e) for i, chunk in enumerate(chunks) for j, e in enumerate(chunk)]
    if limit == 0 or not queries:
        return found
    flat = [v for chunk_vectors in vectors for v in chunk_vectors]
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            sql.statement("related_facts"),
            {
                "conversations": [e.conversation_id for _, _, e in queries],
                "vectors": flat,
                "limit": limit,
            },
        ).fetchall()
    for row in rows:  # in query order, nearest first within a query
        i, j, _ = queries[int(row.pop("ord")) - 1]
        distance = float(row.pop("distance"))
        found[i][j].append((distance, Fact.model_validate(row)))
    return found


def related_facts(per_episode: Sequence[Nearest], limit: int) -> list[Fact]:
    """One chunk's related facts: its episodes' nearest lists united by id, each fact at its
    best (rank within an episode's list, distance), best first, capped at ``limit``."""
    best: dict[object, tuple[int, float, Fact]] = {}
    for nearest in per_episode:
        for rank, (distance, fact) in enumerate(nearest[:limit]):
            known = best.get(fact.id)
            if known is None or (rank, distance) < known[:2]:
                best[fact.id] = (rank, distance, fact)
    ranked = sorted(best.values(), key=lambda t: (t[0], t[1], str(t[2].id)))
    return [fact for _, _, fact in ranked][:limit]
