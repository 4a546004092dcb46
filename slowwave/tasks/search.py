"""search: what an agent gets back out of semantic memory.

Hybrid retrieval (full text + exact vector, a temporal channel when the query names a time:
``tasks.timeframe``, and the source episodes' transcripts, fused by reciprocal rank fusion; then a
session channel and a diversity that follow how alike the best source episodes score; see
``sql/statements/search.sql``) over one conversation's facts: the active ones, or those valid
at a point in event time (``as_of``).
Renders seed 001's markdown, seed 000's Known Facts / Behavioral Guidelines split, or JSON
with every channel's rank and the fused score; ``context`` packs the facts an agent should
always have into a token budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Literal
from uuid import UUID

import numpy as np
import psycopg
from psycopg.rows import dict_row
from pydantic import BaseModel, Field

from slowwave import sql
from slowwave.models.category import Category
from slowwave.models.embedding.base import Embedder, as_queries
from slowwave.models.errors import InvalidK, SearchError, UnknownConversation
from slowwave.models.llm.tokens import average_tokens
from slowwave.models.settings import SearchSettings
from slowwave.models.tenant import shown
from slowwave.tasks.timeframe import temporal_window

Ranker = Literal["hybrid", "vector", "fulltext"]


class SearchHit(BaseModel):
    """One fact found, with how each ranker placed it."""

    id: UUID
    category: Category
    fact: str
    keywords: list[str]
    source_episodic_ids: list[UUID]
    valid_at: datetime
    invalid_at: datetime | None
    fulltext_rank: int | None = Field(description="Rank among full-text candidates, if any.")
    vector_rank: int | None = Field(description="Rank among vector candidates, if any.")
    temporal_rank: int | None = Field(
        default=None,
        description="Rank among the facts valid from within the date the query names, if any.",
    )
    episode_rank: int | None = Field(
        default=None,
        description="Rank by how well the fact's source episode's transcript matches, if any.",
    )
    session_rank: int | None = Field(
        default=None,
        description="Rank in the round robin over source episodes by their summed scores, if any.",
    )
    rerank_rank: int | None = Field(
        default=None, description="Rank by the reranker's score, when the search reranked."
    )
    score: float = Field(
        description="Reciprocal rank fusion score, lowered for later facts of an episode "
        "already represented (diversity)."
    )

    @property
    def sources(self) -> int:
        return len(self.source_episodic_ids)


def has_facts(conn: psycopg.Connection, conversation_id: str) -> bool:
    """Whether the conversation has any fact, valid now or once."""
    row = conn.execute(
        sql.statement("conversation_facts"), {"conversation_id": conversation_id}
    ).fetchone()
    return bool(row and row[0])


def require_known(conn: psycopg.Connection, conversations: Iterable[str]) -> None:
    """Refuse conversations slowwave has never heard of, with where to look, rather than
    answer with an empty table."""
    unknown = [
        row[0]
        for row in conn.execute(
            sql.statement("conversations_unknown"), {"ids": list(conversations)}
        ).fetchall()
    ]
    if unknown:
        names = ", ".join(repr(shown(c)) for c in unknown)
        raise UnknownConversation(
            f"no conversation {names}: nothing was ingested or recorded under that id (the "
            "ids there are: `slowwave db status --conversations`)"
        )


def check_query(
    query: str, k: int, *, max_k: int | None = None, max_chars: int | None = None
) -> None:
    """Refuse a search no ranking can answer: an empty query, one that is not UTF-8 text, or
    ``k`` below 1; and, where a server sets them, a query over ``max_chars`` characters or
    ``k`` over ``max_k``. The one check of a search's input, for the stage and the service."""
    if not query.strip():
        raise SearchError("the query is empty")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:
        raise SearchError("the query is not valid UTF-8 text") from None
    if max_chars is not None and len(query) > max_chars:
        raise SearchError(f"the query has {len(query)} characters, more than {max_chars}")
    if max_k is not None and not 1 <= k <= max_k:
        raise InvalidK(f"k must be from 1 to {max_k}, not {k}")
    if k < 1:
        raise InvalidK(f"k must be at least 1, not {k}")


def search(
    conn: psycopg.Connection,
    embedder: Embedder,
    query: str,
    conversation_id: str,
    k: int = 10,
    *,
    category: Category | str | None = None,
    as_of: datetime | None = None,
    ranker: Ranker = "hybrid",
    policy: SearchSettings | None = None,
    vector: np.ndarray | None = None,
) -> list[SearchHit]:
    """The top ``k`` facts of ``conversation_id`` for ``query`` (``vector``: its embedding,
    when the caller has it already: a server embeds concurrent queries as one batch)."""
    policy = policy or SearchSettings()
    check_query(query, k)
    if category is not None:
        category = Category(category)
    if as_of is not None and as_of.tzinfo is None:
        raise ValueError("as_of needs a time zone")
    if ranker == "fulltext":
        vector = np.zeros(embedder.dim, dtype=np.float32)
    elif vector is None:
        vector = embedder.embed(as_queries(embedder, [query]))[0]
    hybrid = ranker == "hybrid"  # the channels beyond the two rankers serve hybrid search only
    time_from, time_to = (
        temporal_window(query, policy, as_of)
        if hybrid and policy.temporal_weight > 0
        else (None, None)
    )
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            sql.statement("search"),
            {
                "conversation_id": conversation_id,
                "category": category.value if category is not None else None,
                "as_of": as_of,
                "query": query,
                "vector": vector,
                "use_fulltext": ranker != "vector",
                "use_vector": ranker != "fulltext",
                "candidates": policy.candidates,
                "rrf_k": policy.rrf_k,
                "time_from": time_from,
                "time_to": time_to,
                "temporal_weight": policy.temporal_weight if time_from is not None else 0.0,
                "diversity": policy.diversity,
                "diversity_dominant": policy.diversity_dominant,
                "episode_weight": policy.episode_weight if hybrid else 0.0,
                "session_weight": policy.session_weight if hybrid else 0.0,
                "k": k,
            },
        ).fetchall()
    return [SearchHit.model_validate(r) for r in rows]


def record_retrieval(conn: psycopg.Connection, ids: Sequence[UUID]) -> None:
    """Remember that these facts were served (a capacity cap retires the unused first)."""
    if ids:
        with conn.transaction():
            conn.execute(sql.statement("record_retrieval"), {"ids": list(ids)})


def _sources(hit: SearchHit) -> str:
    noun = "conversation" if hit.sources == 1 else "conversations"
    return f"(sources: {hit.sources} {noun})"


def render_markdown(hits: Sequence[SearchHit]) -> str:
    """Seed 001's tool-result format."""
    lines = ["## Semantic Memory"]
    lines += [f"- [{h.category.value}] {h.fact} {_sources(h)}" for h in hits]
    return "\n".join(lines)


def render_split(hits: Sequence[SearchHit]) -> str:
    """Seed 000's format: guidelines apart from the facts they govern."""
    facts = [h for h in hits if h.category is not Category.guideline]
    guidelines = [h for h in hits if h.category is Category.guideline]
    lines = ["## Known Facts"]
    lines += [f"- {h.fact} {_sources(h)}" for h in facts] or ["- (none)"]
    lines += ["", "## Behavioral Guidelines"]
    lines += [f"- {h.fact} {_sources(h)}" for h in guidelines] or ["- (none)"]
    return "\n".join(lines)


CONTEXT_CATEGORIES = (Category.guideline, Category.identity, Category.preference)


def context(
    conn: psycopg.Connection,
    conversation_id: str,
    budget_tokens: int,
    *,
    as_of: datetime | None = None,
) -> str:
    """Guidelines, then identity and preference facts, best corroborated first, within budget.

    For a system prompt before any query is known (``context_pre_retrieve`` in seed 001).
    """
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            sql.statement("context"),
            {
                "conversation_id": conversation_id,
                "categories": [c.value for c in CONTEXT_CATEGORIES],
                "as_of": as_of,
            },
        ).fetchall()
    chosen: dict[str, list[str]] = {c.value: [] for c in CONTEXT_CATEGORIES}
    used = average_tokens("## Behavioral Guidelines\n## Known Facts\n")
    for row in rows:
        line = f"- [{row['category']}] {row['fact']}"
        cost = average_tokens(line) + 1
        if used + cost > budget_tokens:
            continue
        used += cost
        chosen[row["category"]].append(line)
    guidelines = chosen[Category.guideline.value]
    known = chosen[Category.identity.value] + chosen[Category.preference.value]
    parts = []
    if guidelines:
        parts += ["## Behavioral Guidelines", *guidelines]
    if known:
        parts += ["## Known Facts", *known]
    return "\n".join(parts)
