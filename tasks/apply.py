"""apply: one Postgres transaction per conversation chunk, all or nothing (seed 001 step 3-4).

Inside the transaction, in order: lock the chunk's episodes (still pending under this run's
claim, else it is another run's now: a conflict, not a failure), lock the facts the plan acts
on (active facts of this conversation only, else roll back), find each written fact's nearest
active duplicate, let ``tasks.decide`` turn all of it into rows, then write them, one
set-based statement each: end facts, COPY the new ones, reinforce, record the chunk, COPY the
decision log, mark the episodes consolidated.

What counts against a chunk is only what belongs to it: the database refusing its data
(``CHUNK_REFUSALS``) or the plan naming facts it may not touch. That attempt is counted and,
after ``max_attempts``, the episodes are quarantined. Anything else (a bug in slowwave, a lost
connection) propagates: the shard fails loudly or is retried, and no chunk is charged. A
connection lost during COMMIT leaves the outcome unknown: ``read_back`` reads the chunk's
recorded outcome (chunk ids are derived from the run and the chunk's content, so a retry has
its first try's id) before anything is applied or charged again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

import psycopg
import psycopg.errors

import sql
from models import faultpoints
from models.chunk import ApplyResult
from models.embedding.base import Vectors
from models.faultpoints import around
from models.plan import Decision, Plan
from models.settings import Settings
from sql.copy import copy_rows
from tasks.decide import Known, LogEntry, NewFact, Writes, decide, ended_targets

logger = logging.getLogger(__name__)


class ApplyConflict(RuntimeError):
    """The chunk's episodes are no longer pending under this run's claim."""


class IsolationViolation(RuntimeError):
    """The plan names a fact that is not an active fact of its conversation."""


# The database refusing the chunk's own data (a constraint, a value out of range, a trigger
# that raises): the chunk's failure. Other database errors are slowwave's (a bad statement),
# the server's (internal errors, corruption) or the connection's (transient), never the
# chunk's. A vector of the wrong dimension is a DataError too, but it cannot reach apply: the
# embedder and the schema are checked against SLOWWAVE_EMBEDDING_DIM before a run starts.
CHUNK_REFUSALS: tuple[type[Exception], ...] = (
    IsolationViolation,
    psycopg.DataError,
    psycopg.IntegrityError,
    psycopg.errors.RaiseException,
)

# Column lists, once: the COPY of new facts and of the decision log.
FACT_COLUMNS = (
    ("id", "uuid"),
    ("conversation_id", "text"),
    ("category", "text"),
    ("fact", "text"),
    ("keywords", "text[]"),
    ("source_episodic_ids", "uuid[]"),
    ("valid_at", "timestamptz"),
    ("invalid_at", "timestamptz"),
    ("embedding", "vector"),
    ("supersedes_id", "uuid"),
    ("created_by_run_id", "uuid"),
)
LOG_COLUMNS = (
    ("run_id", "uuid"),
    ("conversation_id", "text"),
    ("chunk_id", "uuid"),
    ("proposed_action", "text"),
    ("action", "text"),
    ("fact_id", "uuid"),
    ("previous_fact_id", "uuid"),
    ("similarity", "float4"),
    ("episode_ids", "uuid[]"),
    ("event_time", "timestamptz"),
    ("reason", "text"),
    ("proposed_fact", "text"),
)


@dataclass(frozen=True)
class ApplyPolicy:
    """The settings apply uses."""

    dedupe_threshold: float
    dedupe_candidates: int
    max_attempts: int

    @classmethod
    def of(cls, settings: Settings) -> ApplyPolicy:
        return cls(settings.dedupe_threshold, settings.dedupe_candidates, settings.max_attempts)


def apply_plan(
    conn: psycopg.Connection,
    plan: Plan,
    vectors: Vectors,
    run_id: UUID,
    policy: ApplyPolicy,
    *,
    model_name: str | None = None,
) -> ApplyResult:
    """Apply ``plan`` in one transaction. A refusal of the chunk's data rolls back and counts
    an attempt; a conflict is recorded apart; anything else propagates."""
    try:
        with conn.transaction():
            result = _apply(conn, plan, vectors, run_id, policy, model_name)
            faultpoints.reached("commit.before", conn)
        faultpoints.reached("commit.after", conn)
        return result
    except ApplyConflict as exc:
        return _conflict(conn, plan, run_id, str(exc), model_name)
    except CHUNK_REFUSALS as exc:
        if conn.closed or conn.broken:
            raise
        reason = f"apply failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
        return record_failure(conn, plan, run_id, reason, policy, model_name=model_name)


def record_failure(
    conn: psycopg.Connection,
    plan: Plan,
    run_id: UUID,
    reason: str,
    policy: ApplyPolicy,
    *,
    model_name: str | None = None,
) -> ApplyResult:
    """Count a failed attempt of the chunk on the episodes this run still holds; quarantine
    them after ``max_attempts``. Holding none of them, it is a conflict, and nothing is
    charged."""
    with conn.transaction():
        rows = conn.execute(
            sql.statement("record_failure"),
            {
                "ids": plan.episode_ids,
                "reason": reason,
                "max_attempts": policy.max_attempts,
                "run_id": run_id,
            },
        ).fetchall()
        if rows:
            quarantined = any(r[0] for r in rows)
            status = "quarantined" if quarantined else "failed"
            _record_chunk(conn, plan, run_id, status, model_name, reason)
    if not rows:
        return _conflict(conn, plan, run_id, f"not charged: {reason}", model_name)
    return ApplyResult(
        chunk_id=plan.chunk_id,
        conversation_id=plan.conversation_id,
        applied=False,
        error=reason,
        quarantined=quarantined,
        episodes=len(plan.episode_ids),
        episode_ids=plan.episode_ids,
    )


def read_back(conn: psycopg.Connection, plan: Plan) -> ApplyResult | None:
    """The recorded outcome of the chunk (by its id), or None when it was never recorded."""
    row = conn.execute(sql.statement("apply_read_back"), {"chunk_id": plan.chunk_id}).fetchone()
    if row is None:
        return None
    status, error, conversation, episode_ids, gated, new, reinforce, merge, update, inv, rej = row
    return ApplyResult(
        chunk_id=plan.chunk_id,
        conversation_id=conversation,
        applied=status == "applied",
        episodes=plan.finished_episodes if status == "applied" else len(episode_ids),
        episode_ids=list(episode_ids),
        gated=int(gated),
        inserted=int(new),
        reinforced=int(reinforce),
        merged=int(merge),
        updated=int(update),
        invalidated=int(inv),
        rejected=int(rej),
        error=error,
        quarantined=status == "quarantined",
        conflict=status == "conflict",
    )


def _conflict(
    conn: psycopg.Connection, plan: Plan, run_id: UUID, reason: str, model_name: str | None
) -> ApplyResult:
    """The episodes are not ours to apply: another run's now. Not the chunk's failure."""
    logger.warning(
        "chunk %s of %s left to another run: %s", plan.chunk_id, plan.conversation_id, reason
    )
    with conn.transaction():
        _record_chunk(conn, plan, run_id, "conflict", model_name, reason)
    return ApplyResult(
        chunk_id=plan.chunk_id,
        conversation_id=plan.conversation_id,
        applied=False,
        conflict=True,
        error=reason,
        episodes=len(plan.episode_ids),
        episode_ids=plan.episode_ids,
    )


def _apply(
    conn: psycopg.Connection,
    plan: Plan,
    vectors: Vectors,
    run_id: UUID,
    policy: ApplyPolicy,
    model_name: str | None,
) -> ApplyResult:
    with around("lock_episodes", conn):
        _lock_episodes(conn, plan, run_id)
    with around("lock_targets", conn):
        known = _lock_targets(conn, plan)
    with around("dedupe", conn):
        nearest = _nearest_duplicates(conn, plan, vectors, policy, known)
    writes = decide(plan, vectors, known, nearest, policy.dedupe_threshold)

    with around("invalidate", conn):
        _end_facts(conn, plan, writes)
    with around("insert_facts", conn):
        _insert_facts(conn, plan, run_id, writes.inserts)
    with around("reinforce", conn):
        _reinforce(conn, plan, writes)
    with around("record_chunk", conn):
        _record_chunk(conn, plan, run_id, "applied", model_name, None)
    with around("write_log", conn):
        _write_log(conn, plan, run_id, writes.log)
    with around("mark_consolidated", conn):
        conn.execute(
            sql.statement("apply_mark_consolidated"),
            {
                "run_id": run_id,
                "gated": plan.gated_ids,
                "ids": plan.episode_ids,
                "messages_to": plan.messages_to or [None] * len(plan.episode_ids),
            },
        )
    return ApplyResult(
        chunk_id=plan.chunk_id,
        conversation_id=plan.conversation_id,
        applied=True,
        episode_ids=plan.episode_ids,
        episodes=plan.finished_episodes,
        gated=len(plan.gated_ids),
        inserted=writes.count(Decision.new),
        reinforced=writes.count(Decision.reinforce),
        merged=writes.count(Decision.merge),
        updated=writes.count(Decision.update),
        invalidated=writes.count(Decision.invalidate),
        rejected=writes.count(Decision.rejected),
        fact_ids=[f.id for f in writes.inserts],
    )


# ── readers: what the decisions depend on ───────────────────────────────────────────────


def _lock_episodes(conn: psycopg.Connection, plan: Plan, run_id: UUID) -> None:
    locked = conn.execute(
        sql.statement("apply_lock_episodes"),
        {
            "ids": plan.episode_ids,
            "messages_from": plan.messages_from or [0] * len(plan.episode_ids),
            "conversation_id": plan.conversation_id,
            "run_id": run_id,
        },
    ).fetchall()
    if len(locked) != len(plan.episode_ids):
        raise ApplyConflict(
            f"{len(plan.episode_ids) - len(locked)} of {len(plan.episode_ids)} episodes are no "
            "longer pending under this run's claim (consolidated by another run, quarantined, "
            "the claim expired and another run took it, or an earlier commit of this part)"
        )


def _lock_targets(conn: psycopg.Connection, plan: Plan) -> dict[UUID, Known]:
    targets = {a.target_id for a in plan.actions if a.target_id is not None}
    if not targets:
        return {}
    rows = conn.execute(
        sql.statement("apply_lock_targets"),
        {"ids": list(targets), "conversation_id": plan.conversation_id},
    ).fetchall()
    known = {r[0]: Known(valid_at=r[1], vector=r[2].to_numpy()) for r in rows}
    missing = targets - set(known)
    if missing:
        raise IsolationViolation(
            f"plan acts on {len(missing)} fact(s) that are not active facts of "
            f"conversation {plan.conversation_id!r}: {sorted(str(m) for m in missing)}"
        )
    return known


def _nearest_duplicates(
    conn: psycopg.Connection,
    plan: Plan,
    vectors: Vectors,
    policy: ApplyPolicy,
    known: dict[UUID, Known],
) -> dict[int, tuple[UUID, float]]:
    """Action index → the nearest active duplicate of the fact it writes, if any; each
    duplicate is added to ``known`` (a later action may act on the fact a new one merged
    into)."""
    writing = plan.writing
    if not writing:
        return {}
    rows = conn.execute(
        sql.statement("apply_dedupe"),
        {
            "vectors": list(vectors),
            "conversation_id": plan.conversation_id,
            "excluded": list(ended_targets(plan)),
            "candidates": policy.dedupe_candidates,
            "threshold": policy.dedupe_threshold,
        },
    ).fetchall()
    nearest: dict[int, tuple[UUID, float]] = {}
    for ordinal, fact_id, similarity, valid_at, vector in rows:  # best first per ordinal
        nearest.setdefault(writing[int(ordinal) - 1], (fact_id, float(similarity)))
        known.setdefault(fact_id, Known(valid_at=valid_at, vector=vector.to_numpy()))
    return nearest


# ── writers: one set-based statement each ───────────────────────────────────────────────


def _end_facts(conn: psycopg.Connection, plan: Plan, writes: Writes) -> None:
    if not writes.endings:
        return
    cur = conn.execute(
        sql.statement("apply_invalidate"),
        {
            "conversation_id": plan.conversation_id,
            "fact_ids": list(writes.endings),
            "times": list(writes.endings.values()),
        },
    )
    if cur.rowcount != len(writes.endings):
        raise IsolationViolation(f"ended {cur.rowcount} of {len(writes.endings)} facts")


def _insert_facts(
    conn: psycopg.Connection, plan: Plan, run_id: UUID, inserts: Sequence[NewFact]
) -> None:
    rows = [
        (
            f.id,
            plan.conversation_id,
            f.category,
            f.fact,
            f.keywords,
            f.source_episodic_ids,
            f.valid_at,
            f.invalid_at,
            f.embedding,
            f.supersedes_id,
            run_id,
        )
        for f in inserts
    ]
    if rows:
        copy_rows(conn, "semantic_memory", FACT_COLUMNS, rows)


def _reinforce(conn: psycopg.Connection, plan: Plan, writes: Writes) -> None:
    if not writes.reinforcements:
        return
    conn.execute(
        sql.statement("apply_reinforce"),
        {
            "conversation_id": plan.conversation_id,
            "fact_ids": [f for f, _ in writes.reinforcements],
            "episode_ids": [e for _, e in writes.reinforcements],
        },
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
        sql.statement("record_chunk"),
        {
            "id": plan.chunk_id,
            "run_id": run_id,
            "conversation_id": plan.conversation_id,
            "episode_ids": plan.episode_ids,
            "status": status,
            "model": model_name,
            "prompt_tokens": plan.prompt_tokens,
            "completion_tokens": plan.completion_tokens,
            "error": error,
        },
    )


def _write_log(conn: psycopg.Connection, plan: Plan, run_id: UUID, log: Sequence[LogEntry]) -> None:
    rows = [
        (
            run_id,
            plan.conversation_id,
            plan.chunk_id,
            e.proposed,
            str(e.action),
            e.fact_id,
            e.previous_fact_id,
            e.similarity,
            e.episode_ids,
            e.event_time,
            e.reason,
            e.proposed_fact,
        )
        for e in log
    ]
    if rows:
        copy_rows(conn, "decision_log", LOG_COLUMNS, rows)
