"""One chunk's stages, batched across conversations: the one wiring of them, for the flows and
in process.

A chunk goes through ``open_chunks`` (gate, predict, the prompt), the model, ``finish_chunks``
(calibrate: parse, guard, the second look, embed, evidence), ``judge_chunks`` (the change
check, the gray zone) and ``apply_chunks`` (a transaction per batch of
chunks of distinct conversations, each chunk all or nothing).
The stages take chunks of many conversations at once; ``tasks.chains`` schedules them so that
each conversation is an independent chain: its chunk k+1 is opened only after chunk k is
applied (and sees the facts it wrote), while the other conversations' chunks keep the model
busy. ``consolidate_shard`` runs one backlog through them (``stages_for`` binds them to a run);
the run driver (``tasks.consolidate``) calls it for each shard. ``RunPolicy`` carries the few
settings the stages use, built once at the edge.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from uuid import UUID

import numpy as np
import psycopg

from slowwave.models import faultpoints
from slowwave.models.chunk import ApplyResult, ChunkToApply, OpenChunk, PreparedChunk
from slowwave.models.consolidation import ConsolidationOutput, FactAction
from slowwave.models.embedding.base import Embedder
from slowwave.models.episode import Episode
from slowwave.models.ids import chunk_id
from slowwave.models.llm.base import ModelAnswer, StructuredModel
from slowwave.models.plan import Plan, PlannedAction, Rejection
from slowwave.models.run import ChunkFailure, RunSummary
from slowwave.models.settings import ConsolidationSettings, Settings
from slowwave.sql.db import Database
from slowwave.tasks.apply import apply_plans, read_back, record_failure
from slowwave.tasks.calibrate import build_request, calibration_of
from slowwave.tasks.chains import Backlog, Stages, run_chains
from slowwave.tasks.changes import find_changes
from slowwave.tasks.chunking import ChunkBudget, fit_facts, run_budget
from slowwave.tasks.claim import ClaimPolicy
from slowwave.tasks.embed import embed_plans, embed_uncited
from slowwave.tasks.evidence import attribute_evidence
from slowwave.tasks.forget import forgotten_among
from slowwave.tasks.gate import gated
from slowwave.tasks.gray_zone import judge_gray_zone
from slowwave.tasks.grounding import Grounding
from slowwave.tasks.guard import guard, hold_reason, latest_end
from slowwave.tasks.predict import episode_vectors, nearest_facts, related_facts
from slowwave.tasks.second_look import old_counts_dropped, second_look
from slowwave.tasks.speaker_check import SpeakerCheck
from slowwave.tasks.spending import over_budget
from slowwave.tasks.surprise import score_surprise

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunPolicy:
    """The settings the consolidation stages use, taken from ``Settings`` once per run."""

    claim: ClaimPolicy
    budget: ChunkBudget
    grounding: Grounding
    # the rest of the consolidation settings (the gray zone, the change check, the second look,
    # profiles, the related facts shown, the speaker check, the budgets) are read here
    consolidation: ConsolidationSettings

    @classmethod
    def of(cls, settings: Settings, model: object) -> RunPolicy:
        """``model``: the runtime whose context and tokenizer cut the chunks."""
        return cls(
            claim=ClaimPolicy.of(settings),
            budget=run_budget(model, settings),
            grounding=Grounding(settings.consolidation.grounding),
            consolidation=settings.consolidation,
        )


@contextmanager
def timed(summary: RunSummary, stage: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        summary.add_time(stage, time.perf_counter() - start)


def open_chunks(
    db: Database,
    chunks: Sequence[Sequence[Episode]],
    embedder: Embedder,
    policy: RunPolicy,
    summary: RunSummary,
) -> list[OpenChunk]:
    """predict (and surprise) → gate → the model's prompt, for chunks of different
    conversations at once. Every episode is embedded and its nearest facts found first: the
    nearest gives the surprise of an episode that has none, which the gate then uses. The facts
    shown are the kept episodes' related facts, within the room ``policy.budget`` reserved."""
    opened: list[OpenChunk] = []
    with timed(summary, "predict"):
        with db.connection() as conn:
            forgotten = forgotten_among(conn, (c[0].conversation_id for c in chunks))
        for chunk in (c for c in chunks if c[0].conversation_id in forgotten):
            # forgotten since it was claimed: neither embedded nor shown to the model; apply
            # drops it and its conversation
            opened.append(OpenChunk(_plan_of(chunk, summary, kept=range(len(chunk))), [], [], None))
        chunks = [c for c in chunks if c[0].conversation_id not in forgotten]
        if not chunks:
            return opened
        embedded = episode_vectors(embedder, chunks)
        with db.connection() as conn:
            nearest = nearest_facts(
                conn, chunks, embedded, max(policy.consolidation.related_facts_limit, 1)
            )
            chunks = score_surprise(conn, chunks, nearest)
    with timed(summary, "gate"):
        for chunk, vectors, per_episode in zip(chunks, embedded, nearest, strict=True):
            kept = [j for j, e in enumerate(chunk) if not gated(e, policy.consolidation)]
            plan = _plan_of(chunk, summary, kept)
            visible = [chunk[j] for j in kept]
            if not kept:
                opened.append(OpenChunk(plan, visible, [], None, None))
                continue
            facts = related_facts(
                [per_episode[j] for j in kept], policy.consolidation.related_facts_limit
            )
            facts = fit_facts(facts, policy.budget, policy.consolidation.related_facts_limit)
            request = build_request(
                str(plan.chunk_id), facts, visible, policy.consolidation.flashbulb_surprise
            )
            opened.append(OpenChunk(plan, visible, facts, request, vectors[kept]))
    summary.model_calls += sum(1 for o in opened if o.request is not None)
    return opened


def _plan_of(chunk: Sequence[Episode], summary: RunSummary, kept: Sequence[int]) -> Plan:
    """A chunk's plan before the model answers: its episodes, those the gate consolidates
    (every one not ``kept``), and its event time."""
    return Plan(
        chunk_id=chunk_id(summary.run_id, (e.part_key for e in chunk)),
        conversation_id=chunk[0].conversation_id,
        episode_ids=[e.id for e in chunk],
        gated_ids=[e.id for j, e in enumerate(chunk) if j not in kept],
        messages_from=[e.messages_from for e in chunk],
        messages_to=[e.messages_to for e in chunk],
        event_time=latest_end(chunk),
    )


def finish_chunks(
    answered: Sequence[tuple[OpenChunk, ModelAnswer | None]],
    model: StructuredModel,
    embedder: Embedder,
    policy: RunPolicy,
    summary: RunSummary,
) -> list[PreparedChunk]:
    """Parse each answer (calibrate) → guard → the second look at the messages no item
    covers, guarded the same way → hold a plan that would end too much of what was shown for
    review → embed what will be written, as one batch → attribute uncited actions to their
    most similar episode."""
    faultpoints.reached("model.answered")
    errors: dict[int, str] = {}
    held: dict[int, str] = {}
    plans = [item.plan for item, _ in answered]
    guarded: list[int] = []
    with timed(summary, "guard"):
        for i, (item, answer) in enumerate(answered):
            if answer is None:  # never asked: the gate consolidated the whole chunk
                continue
            calibration = calibration_of(answer)
            item.plan.prompt_tokens = calibration.prompt_tokens
            item.plan.completion_tokens = calibration.completion_tokens
            item.plan.cached_tokens = calibration.cached_tokens
            item.plan.model_calls = 1
            item.plan.refusals, item.plan.waited_s = answer.refusals, answer.waited_s
            if calibration.output is None:
                errors[i] = calibration.error or "no answer"
                continue
            if calibration.cut_off:
                summary.answers_cut_off += 1
                logger.warning("chunk %s: answer cut off at max_tokens", item.plan.chunk_id)
            output = calibration.output
            item.plan.actions, item.plan.rejections = _guarded(output, item, policy, embedder)
            guarded.append(i)
    with timed(summary, "second_look"):
        looking = [(answered[i][0], plans[i].actions) for i in guarded]
        looked = second_look(model, looking, policy.consolidation, summary)
        for g, output in looked.items():
            item = answered[guarded[g]][0]
            actions, rejections = _guarded(output, item, policy, embedder)
            for action in actions:
                action.second_look = True
                action.add_reason("stated by the second look at a message no item covered")
                if action.proposed is FactAction.update:  # the model's second look writes new
                    action.add_reason(
                        "restated from the message without the model: it counts again, with "
                        "another number, what the fact it updates counts"
                    )
            item.plan.actions, dropped = old_counts_dropped(item.plan.actions + actions, item.facts)
            item.plan.rejections += rejections + dropped
    for i in guarded:
        reason = hold_reason(plans[i], len(answered[i][0].facts), policy.consolidation)
        if reason is not None:
            held[i] = reason
    with timed(summary, "embed"):
        ok = [i for i in range(len(plans)) if i not in errors and i not in held]
        vectors = dict(zip(ok, embed_plans(embedder, [plans[i] for i in ok]), strict=True))
        uncited = embed_uncited(embedder, [plans[i] for i in ok])
        for i, extra in zip(ok, uncited, strict=True):
            item = answered[i][0]
            if item.episode_vectors is not None:
                attribute_evidence(item.plan, item.visible, item.episode_vectors, vectors[i], extra)
    empty = np.zeros((0, embedder.dim), dtype=np.float32)
    return [
        PreparedChunk(plan, vectors.get(i, empty), errors.get(i), held.get(i))
        for i, plan in enumerate(plans)
    ]


def _guarded(
    output: ConsolidationOutput, item: OpenChunk, policy: RunPolicy, embedder: Embedder
) -> tuple[list[PlannedAction], list[Rejection]]:
    return guard(
        output,
        item.facts,
        item.visible,
        policy.grounding,
        SpeakerCheck(item.visible, item.facts, embedder)
        if policy.consolidation.check_speaker
        else None,
    )


def judge_chunks(
    db: Database,
    model: StructuredModel,
    embedder: Embedder,
    prepared: list[PreparedChunk],
    policy: ConsolidationSettings,
    summary: RunSummary,
) -> list[PreparedChunk]:
    """The change check (``tasks.changes``), then the gray zone (``tasks.gray_zone``), each
    when it is on and has something to ask: at most one model call each for the step."""
    if policy.change_check:
        with timed(summary, "changes"), db.connection() as conn:
            find_changes(conn, model, prepared, policy, summary)
    if policy.gray_zone_merge:
        with timed(summary, "gray_zone"), db.connection() as conn:
            judge_gray_zone(conn, model, embedder, prepared, policy, summary)
    return prepared


# Chunks applied in one transaction at most: a chain step can hold thousands, and a
# transaction that long would hold its locks, and its undo, for as long.
APPLY_BATCH_CHUNKS = 256


def apply_chunks(
    db: Database,
    prepared: Sequence[PreparedChunk],
    policy: ConsolidationSettings,
    summary: RunSummary,
    model_name: str,
    settle: Callable[[ApplyResult], None] | None = None,
) -> list[ApplyResult]:
    """Apply the chunks (of distinct conversations: one step of the chains) in batches of up
    to ``APPLY_BATCH_CHUNKS``, one transaction each (``tasks.apply.apply_plans``: each chunk
    all or nothing), count them, and ``settle`` each once committed: when a later batch fails
    (a dropped connection), the ones before it are settled and a retry does not apply them
    again.

    A connection lost while a batch was applied (during its COMMIT, say) leaves the outcome
    unknown: it is read back on a new connection. Recorded, the chunks are settled; not
    recorded, the error propagates (transient: the shard is retried) and nothing is charged."""
    results: list[ApplyResult] = []
    with timed(summary, "apply"):
        for start in range(0, len(prepared), APPLY_BATCH_CHUNKS):
            batch = prepared[start : start + APPLY_BATCH_CHUNKS]
            try:
                with db.connection() as conn:
                    done = _apply_batch(conn, batch, policy, summary.run_id, model_name)
            except psycopg.OperationalError:
                with db.connection() as conn:
                    recovered = read_back(conn, [item.plan for item in batch])
                if len(recovered) < len(batch):  # rolled back: the retry applies it
                    raise
                logger.warning(
                    "connection lost while %d chunk(s) were recorded; read back: all recorded",
                    len(batch),
                )
                done = [recovered[item.plan.chunk_id] for item in batch]
            for item, result in zip(batch, done, strict=True):
                count(summary, item.plan, result)
                results.append(result)
                if settle is not None:
                    settle(result)
    return results


def _apply_batch(
    conn: psycopg.Connection,
    batch: Sequence[PreparedChunk],
    policy: ConsolidationSettings,
    run_id: UUID,
    model_name: str,
) -> list[ApplyResult]:
    """Chunks recorded by an earlier try come back as recorded; those that failed before
    apply are charged; the rest are applied together."""
    results = read_back(conn, [item.plan for item in batch])
    ready: list[ChunkToApply] = []
    for item in batch:
        plan = item.plan
        if plan.chunk_id in results:  # a retried chunk whose first try was recorded
            continue
        # a chunk the gate consolidated entirely never reached the model
        asked = model_name if set(plan.gated_ids) != set(plan.episode_ids) else None
        if item.error is not None:
            results[plan.chunk_id] = record_failure(
                conn, plan, run_id, item.error, policy, model_name=asked
            )
        elif item.held is not None:  # quarantined at once: the next try would be held again
            results[plan.chunk_id] = record_failure(
                conn,
                plan,
                run_id,
                item.held,
                policy.model_copy(update={"max_attempts": 1}),
                model_name=asked,
            )
        else:
            ready.append(ChunkToApply(plan, item.vectors, asked))
    for group in distinct_conversations(ready):
        for result in apply_plans(conn, group, run_id, policy):
            results[result.chunk_id] = result
    return [results[item.plan.chunk_id] for item in batch]


def distinct_conversations(chunks: Sequence[ChunkToApply]) -> list[list[ChunkToApply]]:
    """The chunks in groups that hold each conversation once, in order: a conversation's
    later chunk must see what its earlier one wrote, so they never share a transaction's
    statements. (The chains hand apply one chunk per conversation; this keeps any caller
    right.)"""
    groups: list[list[ChunkToApply]] = []
    seen: dict[str, int] = {}
    for chunk in chunks:
        k = seen.get(chunk.plan.conversation_id, -1) + 1
        seen[chunk.plan.conversation_id] = k
        if k == len(groups):
            groups.append([])
        groups[k].append(chunk)
    return groups


def count(summary: RunSummary, plan: Plan, result: ApplyResult) -> None:
    summary.chunks += 1
    summary.prompt_tokens += plan.prompt_tokens
    summary.completion_tokens += plan.completion_tokens
    summary.prompt_tokens_cached += plan.cached_tokens
    summary.model_refusals += plan.refusals
    summary.model_waited_s = round(summary.model_waited_s + plan.waited_s, 3)
    if result.forgotten:
        return
    if result.conflict:
        summary.chunks_conflicted += 1
        return
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
    summary.actions_ungrounded += sum(r.ungrounded is not None for r in plan.rejections)
    summary.facts_evicted += result.evicted


def stages_for(
    db: Database,
    model: StructuredModel,
    embedder: Embedder,
    policy: RunPolicy,
    summary: RunSummary,
) -> Stages:
    """The batch stages around the model call, bound to one run."""
    return Stages(
        open=lambda chunks: open_chunks(db, chunks, embedder, policy, summary),
        finish=lambda answered: judge_chunks(
            db,
            model,
            embedder,
            finish_chunks(answered, model, embedder, policy, summary),
            policy.consolidation,
            summary,
        ),
        apply=lambda prepared, settle: apply_chunks(
            db, prepared, policy.consolidation, summary, model.name, settle
        ),
        over_budget=lambda conversations: over_budget(
            db, summary.run_id, policy.consolidation, conversations
        ),
    )


def consolidate_shard(
    db: Database,
    backlog: Backlog,
    model: StructuredModel,
    embedder: Embedder,
    policy: RunPolicy,
    summary: RunSummary,
    *,
    after_step: Callable[[int], None] | None = None,
) -> None:
    """The backlog's conversations as chains: open → model → finish → apply, a chunk each.

    The backlog is consumed only as chunks are applied, so calling this again after a
    transient failure (a dropped connection, a restarted actor) goes on where it stopped.
    """
    run_chains(
        backlog, summary, model, stages_for(db, model, embedder, policy, summary), after_step
    )
