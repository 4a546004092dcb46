"""rerank: a search's best candidates, facts and episodic memories, put in the order a reranker
(``models.rerank``) scores each against the query.

The first stage (``tasks.search`` for facts, ``tasks.memories`` for episodes) ranks by fused
channel ranks; the reranker reads the query and each candidate's text together: a fact's
sentence, a memory's text as the search returns it (cut to its token budget around what
matched). Each list keeps its best ``k``, each item its rank by the reranker (``ranks``), and
the scores, one scale for both kinds, order a fused list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from slowwave.models.episode import EpisodicHit
from slowwave.models.rerank import Reranker
from slowwave.tasks.search import SearchHit


@dataclass(frozen=True)
class Reranked:
    facts: list[SearchHit]
    memories: list[EpisodicHit]
    scores: dict[UUID, float]  # the reranker's score of every item kept


def rerank(
    reranker: Reranker,
    query: str,
    facts: Sequence[SearchHit],
    memories: Sequence[EpisodicHit],
    *,
    k: int,
    memories_k: int,
) -> Reranked:
    """The best ``k`` of ``facts`` and ``memories_k`` of ``memories`` by the reranker's score
    (a tie keeps the first stage's order)."""
    fact_scores = reranker.score(query, [f.fact for f in facts])
    memory_scores = reranker.score(query, [m.text for m in memories])
    fact_order = sorted(range(len(facts)), key=lambda i: -fact_scores[i])[:k]
    memory_order = sorted(range(len(memories)), key=lambda i: -memory_scores[i])[:memories_k]
    return Reranked(
        facts=[facts[i].model_copy(update={"rerank_rank": n}) for n, i in enumerate(fact_order, 1)],
        memories=[
            memories[i].model_copy(update={"ranks": {**memories[i].ranks, "rerank": n}})
            for n, i in enumerate(memory_order, 1)
        ],
        scores={facts[i].id: fact_scores[i] for i in fact_order}
        | {memories[i].id: memory_scores[i] for i in memory_order},
    )
