"""apply: one Postgres transaction per conversation chunk, all or nothing (seed 001 step 3-4).

Inside the transaction, in order: lock the chunk's episodes (still pending under this run's
claim, else roll back), lock the facts the plan acts on (active facts of this conversation
only, else roll back), dedupe new facts (against each other in memory, then against the
conversation's active facts in SQL), COPY the facts to insert into a staging table and insert
them with one statement, reinforce / invalidate with one statement each, COPY the decision
log, record the chunk, mark the episodes consolidated. A failure rolls all of it back; the
attempt is then counted and, after ``max_attempts``, the episodes are quarantined.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

import numpy as np
import psycopg

import sql
from models.consolidation import FactAction
from models.embedding.base import Vectors
from models.ids import new_id
from models.plan import Plan, PlannedAction
from slowwave.settings import Settings


class ApplyConflict(RuntimeError):
    """The chunk's episodes are no longer pending under this run's claim."""


class IsolationViolation(RuntimeError):
    """The plan names a fact that is not an active fact of its conversation."""


@dataclass
class ApplyResult:
    """What applying one chunk did (or why it did nothing)."""

    chunk_id: UUID
    conversation_id: str
    applied: bool
    episodes: int = 0
    gated: int = 0
    inserted: int = 0
    reinforced: int = 0
    merged: int = 0
    updated: int = 0
    invalidated: int = 0
    rejected: int = 0
    error: str | None = None
    quarantined: bool = False
    fact_ids: list[UUID] = field(default_factory=list)


@dataclass
class _LogRow:
    proposed: str
    action: str
    fact_id: UUID | None
    previous_fact_id: UUID | None
    similarity: float | None
    episode_ids: list[UUID]
    event_time: datetime
    reason: str | None
    proposed_fact: str | None


_STAGE_TYPES = [
    "uuid",
    "text",
    "text",
    "text[]",
    "uuid[]",
    "timestamptz",
    "vector",
    "uuid",
]
_LOG_COLUMNS = (
    "run_id, conversation_id, chunk_id, proposed_action, action, fact_id, previous_fact_id, "
    "similarity, episode_ids, event_time, reason, proposed_fact"
)
_LOG_TYPES = [
    "uuid",
    "text",
    "uuid",
    "text",
    "text",
    "uuid",
    "uuid",
    "float4",
    "uuid[]",
    "timestamptz",
    "text",
    "text",
]


def cluster_within_plan(vectors: Vectors, threshold: float) -> list[tuple[int, float] | None]:
    """For each new fact, the earlier representative it duplicates (index, cosine), or None.

    Greedy in answer order: a fact joins the first earlier representative at or above the
    threshold; representatives are the facts that joined none.
    """
    found: list[tuple[int, float] | None] = []
    representatives: list[int] = []
    for i in range(len(vectors)):
        match: tuple[int, float] | None = None
        if representatives:
            sims = vectors[representatives] @ vectors[i]
            best = int(np.argmax(sims))
            if float(sims[best]) >= threshold:
                match = (representatives[best], float(sims[best]))
        if match is None:
            representatives.append(i)
        found.append(match)
    return found


def apply_plan(
    conn: psycopg.Connection,
    plan: Plan,
    vectors: Vectors,
    run_id: UUID,
    settings: Settings,
    *,
    model_name: str | None = None,
) -> ApplyResult:
    """Apply ``plan`` in one transaction; on failure roll back and count the attempt."""
    try:
        with conn.transaction():
            result = _apply(conn, plan, vectors, run_id, settings, model_name)
        return result
    except (psycopg.Error, ApplyConflict, IsolationViolation, ValueError) as exc:
        if conn.closed or conn.broken:
            raise
        reason = f"apply failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
        return record_failure(conn, plan, run_id, reason, settings, model_name=model_name)


def record_failure(
    conn: psycopg.Connection,
    plan: Plan,
    run_id: UUID,
    reason: str,
    settings: Settings,
    *,
    model_name: str | None = None,
) -> ApplyResult:
    """Count a failed attempt of the chunk; quarantine its episodes after ``max_attempts``."""
    with conn.transaction():
        rows = conn.execute(
            sql.statement("record_failure"),
            {"ids": plan.episode_ids, "reason": reason, "max_attempts": settings.max_attempts},
        ).fetchall()
        quarantined = any(r[0] for r in rows)
        _record_chunk(
            conn, plan, run_id, "quarantined" if quarantined else "failed", model_name, reason
        )
    return ApplyResult(
        chunk_id=plan.chunk_id,
        conversation_id=plan.conversation_id,
        applied=False,
        error=reason,
        quarantined=quarantined,
        episodes=len(plan.episode_ids),
    )


def _record_chunk(
    conn: psycopg.Connection,
    plan: Plan,
    run_id: UUID,
    status: str,
    model_name: str | None,
    error: str | None,
) -> None:
    conn.execute(
        "INSERT INTO consolidation_chunks (id, run_id, conversation_id, episode_ids, status, "
        "model, prompt_tokens, completion_tokens, error) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            plan.chunk_id,
            run_id,
            plan.conversation_id,
            plan.episode_ids,
            status,
            model_name,
            plan.prompt_tokens,
            plan.completion_tokens,
            error,
        ),
    )


def _apply(
    conn: psycopg.Connection,
    plan: Plan,
    vectors: Vectors,
    run_id: UUID,
    settings: Settings,
    model_name: str | None,
) -> ApplyResult:
    conversation = plan.conversation_id
    result = ApplyResult(
        chunk_id=plan.chunk_id,
        conversation_id=conversation,
        applied=True,
        episodes=len(plan.episode_ids),
        gated=len(plan.gated_ids),
        rejected=len(plan.rejections),
    )
    writing = [a for a in plan.actions if a.writes_fact]
    if len(writing) != len(vectors):
        raise ValueError(f"{len(writing)} facts to write but {len(vectors)} vectors")
    vector_of = {id(a): vectors[i] for i, a in enumerate(writing)}

    # 1. the episodes are still ours to consolidate
    locked = conn.execute(
        sql.statement("apply_lock_episodes"),
        {"ids": plan.episode_ids, "conversation_id": conversation, "run_id": run_id},
    ).fetchall()
    if len(locked) != len(plan.episode_ids):
        raise ApplyConflict(
            f"{len(plan.episode_ids) - len(locked)} of {len(plan.episode_ids)} episodes are no "
            "longer pending under this run's claim (consolidated by another run, quarantined, "
            "or the claim expired)"
        )

    # 2. the facts acted on are active facts of this conversation
    targets = {a.target_id for a in plan.actions if a.target_id is not None}
    valid_since: dict[UUID, datetime] = {}
    if targets:
        rows = conn.execute(
            sql.statement("apply_lock_targets"),
            {"ids": list(targets), "conversation_id": conversation},
        ).fetchall()
        valid_since = {r[0]: r[1] for r in rows}
        missing = targets - set(valid_since)
        if missing:
            raise IsolationViolation(
                f"plan acts on {len(missing)} fact(s) that are not active facts of "
                f"conversation {conversation!r}: {sorted(str(m) for m in missing)}"
            )

    log: list[_LogRow] = []
    staged: list[tuple[object, ...]] = []
    reinforce_pairs: list[tuple[UUID, UUID]] = []
    endings: list[tuple[UUID, datetime]] = []
    ending_ids = {
        a.target_id
        for a in plan.actions
        if a.action in (FactAction.update, FactAction.invalidate) and a.target_id is not None
    }

    def stage(action: PlannedAction, fact_id: UUID, supersedes: UUID | None) -> None:
        valid_at = action.event_time
        if supersedes is not None:
            valid_at = max(valid_at, valid_since[supersedes])
        staged.append(
            (
                fact_id,
                str(action.category),
                action.fact,
                action.keywords,
                action.episode_ids,
                valid_at,
                vector_of[id(action)],
                supersedes,
            )
        )
        result.fact_ids.append(fact_id)

    # 3. dedupe new facts: within the plan, then against the conversation's active facts
    news = [a for a in plan.actions if a.action is FactAction.new]
    news_vectors = (
        np.stack([vector_of[id(a)] for a in news]) if news else np.zeros((0, 1), np.float32)
    )
    within = cluster_within_plan(news_vectors, settings.dedupe_threshold)
    representatives = [i for i, m in enumerate(within) if m is None]
    existing_hit: dict[int, tuple[UUID, float]] = {}
    if representatives:
        rows = conn.execute(
            sql.statement("apply_dedupe"),
            {
                "vectors": [news_vectors[i] for i in representatives],
                "conversation_id": conversation,
                "excluded": list(ending_ids),
                "candidates": settings.dedupe_candidates,
                "threshold": settings.dedupe_threshold,
            },
        ).fetchall()
        for ordinal, fact_id, similarity in rows:
            index = representatives[int(ordinal) - 1]
            existing_hit.setdefault(index, (fact_id, float(similarity)))

    resolved: dict[int, UUID] = {}  # new-fact index → the fact it became or merged into
    for i, action in enumerate(news):
        match = within[i]
        if match is not None:
            target, similarity = resolved[match[0]], match[1]
        elif i in existing_hit:
            target, similarity = existing_hit[i]
        else:
            fact_id = new_id()
            stage(action, fact_id, None)
            resolved[i] = fact_id
            result.inserted += 1
            log.append(_row(action, "new", fact_id, None, None))
            continue
        resolved[i] = target
        reinforce_pairs += [(target, e) for e in action.episode_ids]
        result.merged += 1
        log.append(_row(action, "merge", target, None, similarity))

    # 4. reinforce, update, invalidate
    for action in plan.actions:
        existing = action.target_id
        if existing is None:
            continue
        if action.action is FactAction.reinforce:
            reinforce_pairs += [(existing, e) for e in action.episode_ids]
            result.reinforced += 1
            log.append(_row(action, "reinforce", existing, None, None))
        elif action.action is FactAction.update:
            fact_id = new_id()
            stage(action, fact_id, existing)
            endings.append((existing, action.event_time))
            result.updated += 1
            log.append(_row(action, "update", fact_id, existing, None))
        elif action.action is FactAction.invalidate:
            endings.append((existing, action.event_time))
            result.invalidated += 1
            log.append(_row(action, "invalidate", existing, None, None))
    for rejection in plan.rejections:
        log.append(
            _LogRow(
                proposed=str(rejection.proposed),
                action="rejected",
                fact_id=None,
                previous_fact_id=rejection.target_id,
                similarity=None,
                episode_ids=plan.episode_ids,
                event_time=plan.event_time,
                reason=rejection.reason,
                proposed_fact=rejection.fact,
            )
        )

    params = {"conversation_id": conversation, "run_id": run_id}
    if endings:
        cur = conn.execute(
            sql.statement("apply_invalidate"),
            {
                **params,
                "fact_ids": [t for t, _ in endings],
                "times": [at for _, at in endings],
            },
        )
        if cur.rowcount != len(endings):
            raise IsolationViolation(f"ended {cur.rowcount} of {len(endings)} facts")
    if staged:
        conn.execute(sql.statement("apply_stage"))
        with conn.cursor().copy(
            "COPY slowwave_staged_facts (id, category, fact, keywords, source_episodic_ids, "
            "valid_at, embedding, supersedes_id) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(_STAGE_TYPES)
            for row in staged:
                copy.write_row(row)
        conn.execute(sql.statement("apply_insert"), params)
    if reinforce_pairs:
        conn.execute(
            sql.statement("apply_reinforce"),
            {
                **params,
                "fact_ids": [f for f, _ in reinforce_pairs],
                "episode_ids": [e for _, e in reinforce_pairs],
            },
        )

    # 5. audit and bookkeeping
    _record_chunk(conn, plan, run_id, "applied", model_name, None)
    if log:
        with conn.cursor().copy(
            f"COPY decision_log ({_LOG_COLUMNS}) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(_LOG_TYPES)
            for entry in log:
                copy.write_row(
                    (
                        run_id,
                        conversation,
                        plan.chunk_id,
                        entry.proposed,
                        entry.action,
                        entry.fact_id,
                        entry.previous_fact_id,
                        entry.similarity,
                        entry.episode_ids,
                        entry.event_time,
                        entry.reason,
                        entry.proposed_fact,
                    )
                )
    conn.execute(
        sql.statement("apply_mark_consolidated"),
        {"run_id": run_id, "gated": plan.gated_ids, "ids": plan.episode_ids},
    )
    return result


def _row(
    action: PlannedAction,
    applied: str,
    fact_id: UUID | None,
    previous: UUID | None,
    similarity: float | None,
) -> _LogRow:
    return _LogRow(
        proposed=str(action.proposed),
        action=applied,
        fact_id=fact_id,
        previous_fact_id=previous,
        similarity=similarity,
        episode_ids=action.episode_ids,
        event_time=action.event_time,
        reason=action.reason,
        proposed_fact=action.fact,
    )
