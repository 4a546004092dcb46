"""Consolidation of claimed work, in rounds, without Prefect (the flows call the same pieces).

Chronology: a conversation's chunks go one per round, so chunk k+1 is predicted only after
chunk k is applied and sees the facts it wrote. Different conversations are independent: the
chunks of a round are embedded, sent to the model and embedded again as single batches.

When a chunk fails and is not yet quarantined, the conversation's later chunks are left for a
later run (its facts would depend on the failed chunk's). When the failure quarantines the
chunk, its episodes are out of the way and the conversation goes on with its next chunk.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from models.embedding.base import Embedder, Vectors
from models.episode import Episode
from models.ids import new_id
from models.llm.base import ConsolidationModel, ConsolidationRequest
from models.plan import Plan
from models.run import ChunkFailure, RunSummary
from slowwave.db import Database
from slowwave.settings import Settings
from tasks.apply import ApplyResult, apply_plan, record_failure
from tasks.calibrate import build_request, calibrate
from tasks.claim import ConversationWork, claim
from tasks.embed import embed_plans
from tasks.gate import split_gated
from tasks.guard import guard, latest_end
from tasks.predict import related_facts
from tasks.runs import recorded_run


@dataclass
class PreparedChunk:
    """A chunk ready for apply: its plan and vectors, or the reason it failed before apply."""

    plan: Plan
    vectors: Vectors
    error: str | None = None


@contextmanager
def timed(summary: RunSummary, stage: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        summary.add_time(stage, time.perf_counter() - start)


def prepare_round(
    db: Database,
    chunks: Sequence[Sequence[Episode]],
    model: ConsolidationModel,
    embedder: Embedder,
    settings: Settings,
    summary: RunSummary,
) -> list[PreparedChunk]:
    """gate → predict → calibrate → guard → embed for one round of chunks."""
    plans: list[Plan] = []
    visible: list[list[Episode]] = []
    with timed(summary, "gate"):
        for chunk in chunks:
            kept, skipped = split_gated(chunk, settings)
            plans.append(
                Plan(
                    chunk_id=new_id(),
                    conversation_id=chunk[0].conversation_id,
                    episode_ids=[e.id for e in chunk],
                    gated_ids=[e.id for e in skipped],
                    event_time=latest_end(chunk),
                )
            )
            visible.append(kept)
    asking = [i for i, kept in enumerate(visible) if kept]

    with timed(summary, "predict"), db.connection() as conn:
        shown = related_facts(
            conn, embedder, [visible[i] for i in asking], settings.related_facts_limit
        )

    requests: list[ConsolidationRequest] = [
        build_request(str(plans[i].chunk_id), facts, visible[i], settings.flashbulb_surprise)
        for i, facts in zip(asking, shown, strict=True)
    ]
    with timed(summary, "calibrate"):
        answers = calibrate(model, requests)
    summary.model_calls += len(requests)

    errors: dict[int, str] = {}
    with timed(summary, "guard"):
        for i, facts in zip(asking, shown, strict=True):
            plan = plans[i]
            calibration = answers[str(plan.chunk_id)]
            plan.prompt_tokens = calibration.prompt_tokens
            plan.completion_tokens = calibration.completion_tokens
            if calibration.output is None:
                errors[i] = calibration.error or "no answer"
                continue
            plan.actions, plan.rejections = guard(calibration.output, facts, visible[i])

    with timed(summary, "embed"):
        ok = [p for i, p in enumerate(plans) if i not in errors]
        vectors = dict(zip((id(p) for p in ok), embed_plans(embedder, ok), strict=True))
    empty = np.zeros((0, embedder.dim), dtype=np.float32)
    return [
        PreparedChunk(plan, vectors.get(id(plan), empty), errors.get(i))
        for i, plan in enumerate(plans)
    ]


def apply_round(
    db: Database,
    prepared: Sequence[PreparedChunk],
    settings: Settings,
    summary: RunSummary,
    model_name: str,
) -> list[ApplyResult]:
    """Apply each chunk in its own transaction; count what happened."""
    results: list[ApplyResult] = []
    with timed(summary, "apply"), db.connection() as conn:
        for item in prepared:
            plan = item.plan
            # a chunk the gate consolidated entirely never reached the model
            asked = model_name if set(plan.gated_ids) != set(plan.episode_ids) else None
            if item.error is not None:
                result = record_failure(
                    conn, plan, summary.run_id, item.error, settings, model_name=asked
                )
            else:
                result = apply_plan(
                    conn, plan, item.vectors, summary.run_id, settings, model_name=asked
                )
            count(summary, item.plan, result)
            results.append(result)
    return results


def count(summary: RunSummary, plan: Plan, result: ApplyResult) -> None:
    summary.chunks += 1
    summary.prompt_tokens += plan.prompt_tokens
    summary.completion_tokens += plan.completion_tokens
    if not result.applied:
        summary.chunks_failed += 1
        if result.quarantined:
            summary.episodes_quarantined += result.episodes
        summary.failures.append(
            ChunkFailure(
                conversation_id=plan.conversation_id,
                chunk_id=plan.chunk_id,
                episodes=result.episodes,
                quarantined=result.quarantined,
                reason=result.error or "",
            )
        )
        return
    summary.episodes_consolidated += result.episodes
    summary.episodes_skipped += result.gated
    summary.facts_inserted += result.inserted
    summary.facts_reinforced += result.reinforced
    summary.facts_updated += result.updated
    summary.facts_invalidated += result.invalidated
    summary.dedupe_merges += result.merged
    summary.actions_rejected += result.rejected


Prepare = Callable[[Sequence[Sequence[Episode]]], list[PreparedChunk]]
Apply = Callable[[Sequence[PreparedChunk]], list[ApplyResult]]


def run_rounds(
    work: Sequence[ConversationWork],
    summary: RunSummary,
    prepare: Prepare,
    apply: Apply,
    after_round: Callable[[], None] | None = None,
) -> None:
    """Wavefront over the conversations: one chunk of each per round, applied before the next.

    ``prepare`` and ``apply`` run one round; the flows pass their Prefect tasks here.
    """
    queues = {w.conversation_id: deque(w.chunks) for w in work if w.chunks}
    while queues:
        prepared = prepare([queue.popleft() for queue in queues.values()])
        for result in apply(prepared):
            queue = queues[result.conversation_id]
            if not result.applied and not result.quarantined:
                summary.episodes_deferred += sum(len(c) for c in queue)
                queue.clear()
        queues = {c: q for c, q in queues.items() if q}
        if after_round is not None:
            after_round()


def consolidate(
    db: Database,
    model: ConsolidationModel,
    embedder: Embedder,
    settings: Settings,
    *,
    kind: str = "manual",
    conversations: Sequence[str] | None = None,
    flow_run_id: str | None = None,
) -> RunSummary:
    """Claim what is due, consolidate it in this process, release the rest, record the run."""
    with recorded_run(db, kind=kind, flow_run_id=flow_run_id) as summary:
        with timed(summary, "claim"), db.connection() as conn:
            work = claim(conn, summary.run_id, settings, conversations=conversations)
        summary.conversations = len(work)
        run_rounds(
            work,
            summary,
            lambda chunks: prepare_round(db, chunks, model, embedder, settings, summary),
            lambda prepared: apply_round(db, prepared, settings, summary, model.name),
        )
    return summary
