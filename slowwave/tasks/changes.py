"""changes: an update the model proposed without naming the fact it updates is checked against
the nearest known fact of its category about the same person, between embed and apply.

The guard writes an ``update`` whose ``existing_fact_id`` names no fact shown as ``new`` (it
cannot guess the target), so "Dana is moving to Manchester in July for a new job ..." was
written beside "Dana is teaching chemistry at a high school in Leeds." and both stayed active.
Here each such fact's nearest active fact of the conversation and category (cosine from
``lower`` to the dedupe threshold; one the plan neither ends nor acts on) that starts with the
same person's name is shown with it as a pair, every pair of a chunk in one short request and
every chunk's request in one ``generate`` call (``models.change``). A pair whose known fact no
longer holds turns the action into the update the model meant: the known fact ends at the new
one's event time and the new one supersedes it (lineage, revertible). An answer that cannot be
read leaves every fact as written. Only the model's own updates are checked: a ``new`` fact is
never made to end another here (the slots do that for single-valued attributes). The category
keeps a small model from ending what merely sits near the new fact: asked about "Kenji plays
in a community orchestra every Sunday." beside "Kenji switched to day shifts at the same
hospital.", the default model said the orchestra no longer held.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

import psycopg
from pydantic import ValidationError

from slowwave import sql
from slowwave.models.change import (
    CHANGE_SYSTEM_PROMPT,
    MAX_PAIRS_PER_REQUEST,
    ChangeJudgement,
    render_change_prompt,
)
from slowwave.models.chunk import PreparedChunk
from slowwave.models.consolidation import FactAction
from slowwave.models.llm.base import Purpose, StructuredModel
from slowwave.models.run import RunSummary
from slowwave.models.settings import Settings, setting_default
from slowwave.tasks.decide import ended_targets
from slowwave.tasks.pair_requests import ask_by_chunk
from slowwave.tasks.restate import subject_name

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChangePolicy:
    """The settings the change check uses."""

    enabled: bool = True
    lower: float = setting_default("gray_zone_lower")
    upper: float = setting_default("dedupe_threshold")

    @classmethod
    def of(cls, settings: Settings) -> ChangePolicy:
        return cls(
            settings.consolidation.change_check,
            settings.consolidation.gray_zone_lower,
            settings.consolidation.dedupe_threshold,
        )


@dataclass(frozen=True)
class Pair:
    """An unnamed update (action ``index`` of chunk ``chunk``) and the known fact it may end."""

    chunk: int
    index: int
    known_id: UUID
    known_fact: str
    similarity: float


def find_changes(
    conn: psycopg.Connection,
    model: StructuredModel,
    prepared: Sequence[PreparedChunk],
    policy: ChangePolicy,
    summary: RunSummary,
) -> None:
    """Ask about the chunks' unnamed updates in one call; turn each whose known fact no longer
    holds into an update of that fact, in place."""
    if not policy.enabled:
        return
    asked = ask_by_chunk(
        model,
        prepared,
        _pairs(conn, prepared, policy),
        purpose=Purpose.change,
        system=CHANGE_SYSTEM_PROMPT,
        render=lambda item, pairs: render_change_prompt(
            [(p.known_fact, item.plan.actions[p.index].fact or "") for p in pairs]
        ),
        schema=ChangeJudgement.response_schema,
        limit=MAX_PAIRS_PER_REQUEST,
        summary=summary,
    )
    summary.change_pairs += sum(len(pairs) for _, pairs, _ in asked)
    for c, pairs, answer in asked:
        taken: set[UUID] = set()
        for pair in _out_of_date(pairs, answer.text):
            if pair.known_id in taken:  # one update per known fact and chunk
                continue
            taken.add(pair.known_id)
            action = prepared[c].plan.actions[pair.index]
            action.action = FactAction.update
            action.target_id = pair.known_id
            action.add_reason(
                f"change check: the model's update names no fact; its nearest fact about the "
                f"same person (cosine {pair.similarity:.2f}) no longer holds once it does"
            )
            summary.changes_found += 1


def _pairs(
    conn: psycopg.Connection, prepared: Sequence[PreparedChunk], policy: ChangePolicy
) -> list[Pair]:
    """Each unnamed update of a chunk ready for apply with its nearest active fact of the same
    category, when that one is in range and starts with the same person's name."""
    origin: list[tuple[int, int]] = []
    vectors = []
    conversations: list[str] = []
    categories: list[str] = []
    excluded: set[UUID] = set()
    for c, item in enumerate(prepared):
        if item.error is not None or item.held is not None:
            continue
        plan = item.plan
        excluded |= ended_targets(plan) | {a.target_id for a in plan.actions if a.target_id}
        for row, index in enumerate(plan.writing):
            action = plan.actions[index]
            if (
                action.action is FactAction.new
                and action.proposed is FactAction.update
                and action.category is not None
                and subject_name(action.fact or "") is not None
            ):
                origin.append((c, index))
                vectors.append(item.vectors[row])
                conversations.append(plan.conversation_id)
                categories.append(action.category.value)
    if not vectors:
        return []
    rows = conn.execute(
        sql.statement("change_nearest"),
        {
            "vectors": vectors,
            "conversations": conversations,
            "categories": categories,
            "excluded": sorted(excluded),
            "lower": policy.lower,
            "upper": policy.upper,
        },
    ).fetchall()
    pairs = []
    for ordinal, known_id, known_fact, similarity in rows:
        c, index = origin[ordinal - 1]
        fact = prepared[c].plan.actions[index].fact or ""
        if subject_name(known_fact) == subject_name(fact):
            pairs.append(Pair(c, index, known_id, known_fact, float(similarity)))
    return pairs


def _out_of_date(pairs: Sequence[Pair], text: str | None) -> list[Pair]:
    """The pairs the answer says the known fact of no longer holds; none from an answer that
    cannot be read."""
    try:
        judgement = ChangeJudgement.model_validate_json((text or "").strip())
    except ValidationError:
        logger.warning("change check: an answer that is not a judgement was ignored")
        return []
    shown = {f"P{i + 1}": pair for i, pair in enumerate(pairs)}
    found = []
    for verdict in judgement.pairs:
        pair = shown.pop(verdict.pair.strip().upper(), None)
        if pair is not None and not verdict.still_true:
            found.append(pair)
    return found
