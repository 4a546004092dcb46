"""predict: the active facts related to a chunk's episodes, to show the model (seed 001 step 1).

The chunk's episode gists are embedded in one batch (all chunks of a round together), each
episode retrieves the nearest active facts of its own conversation, and the per-episode lists
are united by id in rank order and capped.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg.rows import dict_row

import sql
from models.embedding.base import Embedder, Vectors
from models.episode import Episode
from models.fact import Fact
from tasks.embed import embed_groups


def episode_vectors(embedder: Embedder, chunks: Sequence[Sequence[Episode]]) -> list[Vectors]:
    """The gist vector of every episode, per chunk, embedded as one batch: predict queries
    with them, and evidence is attributed by them."""
    return embed_groups(embedder, [[e.gist for e in chunk] for chunk in chunks])


def related_facts(
    conn: psycopg.Connection,
    chunks: Sequence[Sequence[Episode]],
    vectors: Sequence[Vectors],
    limit: int,
) -> list[list[Fact]]:
    """For each chunk, up to ``limit`` related active facts of its conversation, best first;
    ``vectors`` are the chunks' episode vectors (``episode_vectors``)."""
    queries = [(i, e) for i, chunk in enumerate(chunks) for e in chunk]
    if limit == 0 or not queries:
        return [[] for _ in chunks]
    flat = [v for chunk_vectors in vectors for v in chunk_vectors]
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            sql.statement("related_facts"),
            {
                "conversations": [e.conversation_id for _, e in queries],
                "vectors": flat,
                "limit": limit,
            },
        ).fetchall()
    # best (rank within its episode's list, distance) per fact, per chunk
    best: list[dict[object, tuple[int, float, Fact]]] = [{} for _ in chunks]
    rank_in_query: dict[int, int] = {}
    for row in rows:
        ordinal = int(row.pop("ord"))
        distance = float(row.pop("distance"))
        rank = rank_in_query.get(ordinal, 0)
        rank_in_query[ordinal] = rank + 1
        chunk_index = queries[ordinal - 1][0]
        fact = Fact.model_validate(row)
        known = best[chunk_index].get(fact.id)
        if known is None or (rank, distance) < known[:2]:
            best[chunk_index][fact.id] = (rank, distance, fact)
    return [
        [fact for _, _, fact in sorted(found.values(), key=lambda t: (t[0], t[1], str(t[2].id)))][
            :limit
        ]
        for found in best
    ]
