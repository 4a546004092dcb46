"""gray zone: a written fact close to a known one, but not a duplicate, judged by the model
(seed 004's middle zone), between embed and apply.

For every ``new`` fact a step's plans write, its nearest active fact of the conversation is
found in one statement; a pair whose cosine lies in [``lower``, the dedupe threshold) is
shown to the model. Each chunk's pairs go in one request and every chunk's request in one
``generate`` call: never a call per fact. A pair judged the same comes back with one merged
sentence, which must pass the faithfulness gate: embedded, its cosine to each source sentence
is at least ``faithfulness``. A merge that passes turns the action into an update of the known
fact with the merged sentence (the known fact ends where the merged one begins, so its history
stays readable and a revert undoes it), logged as ``merge`` with the pair's similarity. An
answer that cannot be read, a pair judged different and a merge that drifts leave the fact as
the model wrote it: the gray zone only ever merges what it is sure of.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

import numpy as np
import psycopg
from pydantic import ValidationError

from slowwave import sql
from slowwave.models.chunk import PreparedChunk
from slowwave.models.consolidation import FactAction
from slowwave.models.embedding.base import Embedder
from slowwave.models.fact import embedding_text
from slowwave.models.llm.base import Purpose, StructuredModel
from slowwave.models.merge import (
    MAX_PAIRS_PER_REQUEST,
    MERGE_SYSTEM_PROMPT,
    MergeJudgement,
    render_merge_prompt,
)
from slowwave.models.run import RunSummary
from slowwave.models.settings import ConsolidationSettings
from slowwave.tasks.decide import cosine
from slowwave.tasks.pair_requests import ask_by_chunk, written_facts

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pair:
    """A written fact (action ``index`` of chunk ``chunk``, row ``row`` of its vectors) and its
    nearest known fact in the gray zone."""

    chunk: int
    index: int
    row: int
    known_id: UUID
    known_fact: str
    known_vector: np.ndarray
    similarity: float


def judge_gray_zone(
    conn: psycopg.Connection,
    model: StructuredModel,
    embedder: Embedder,
    prepared: Sequence[PreparedChunk],
    policy: ConsolidationSettings,
    summary: RunSummary,
) -> None:
    """Find the chunks' gray-zone pairs, ask the model about them in one call, and turn each
    faithful merge into an update of the known fact, in place (plan and vector)."""
    if not policy.gray_zone_merge:
        return
    asked = ask_by_chunk(
        model,
        prepared,
        _pairs(conn, prepared, policy),
        purpose=Purpose.merge,
        system=MERGE_SYSTEM_PROMPT,
        render=lambda item, pairs: render_merge_prompt(
            [(item.plan.actions[p.index].fact or "", p.known_fact) for p in pairs]
        ),
        schema=MergeJudgement.response_schema,
        limit=MAX_PAIRS_PER_REQUEST,
        summary=summary,
    )
    summary.gray_zone_pairs += sum(len(pairs) for _, pairs, _ in asked)
    merges: list[tuple[Pair, str]] = []
    for _, pairs, answer in asked:
        merges += _merges(pairs, answer.text)
    if not merges:
        return
    texts = []
    for pair, merged in merges:
        action = prepared[pair.chunk].plan.actions[pair.index]
        texts.append(embedding_text(str(action.category), merged, action.keywords))
    vectors = embedder.embed(texts)
    taken: set[tuple[int, UUID]] = set()
    for (pair, merged), vector in zip(merges, vectors, strict=True):
        item = prepared[pair.chunk]
        own = cosine(vector, item.vectors[pair.row])
        known = cosine(vector, pair.known_vector)
        if min(own, known) < policy.merge_faithfulness:
            summary.gray_zone_unfaithful += 1
            continue
        if (pair.chunk, pair.known_id) in taken:  # one merge per known fact and chunk
            continue
        taken.add((pair.chunk, pair.known_id))
        action = item.plan.actions[pair.index]
        action.action = FactAction.update
        action.target_id = pair.known_id
        action.proposed_fact = action.proposed_fact or action.fact  # the model's, if given
        action.fact = merged
        action.gray_zone = pair.similarity
        note = (
            f"gray-zone merge: judged the same as a known fact (cosine {pair.similarity:.2f}); "
            f"merged sentence faithful to both ({own:.2f}, {known:.2f})"
        )
        action.add_reason(note)
        item.vectors[pair.row] = vector
        summary.gray_zone_merges += 1


def _pairs(
    conn: psycopg.Connection, prepared: Sequence[PreparedChunk], policy: ConsolidationSettings
) -> list[Pair]:
    """Every ``new`` fact of a chunk ready for apply whose nearest active fact (one the plan
    neither ends nor acts on) lies in the gray zone."""
    written = written_facts(prepared, lambda a: a.action is FactAction.new)
    if not written.vectors:
        return []
    rows = conn.execute(
        sql.statement("gray_zone_nearest"),
        {
            "vectors": written.vectors,
            "conversations": written.conversations,
            "excluded": sorted(written.excluded),
            "lower": policy.gray_zone_lower,
            "upper": policy.dedupe_threshold,
        },
    ).fetchall()
    pairs = []
    for ordinal, known_id, known_fact, similarity, known_vector in rows:
        c, index, row = written.origin[ordinal - 1]
        pairs.append(
            Pair(c, index, row, known_id, known_fact, known_vector.to_numpy(), float(similarity))
        )
    return pairs


def _merges(pairs: Sequence[Pair], text: str | None) -> list[tuple[Pair, str]]:
    """The pairs the answer judged the same, with their merged sentence; nothing from an
    answer that cannot be read."""
    try:
        judgement = MergeJudgement.model_validate_json((text or "").strip())
    except ValidationError:
        logger.warning("gray zone: an answer that is not a judgement was ignored")
        return []
    shown = {f"P{i + 1}": pair for i, pair in enumerate(pairs)}
    found: list[tuple[Pair, str]] = []
    for item in judgement.pairs:
        pair = shown.pop(item.pair.strip().upper(), None)
        merged = " ".join((item.merged or "").split())
        if pair is not None and item.same and merged:
            found.append((pair, merged))
    return found
