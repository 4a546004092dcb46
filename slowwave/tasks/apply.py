"""apply: chunks of distinct conversations in one Postgres transaction, each chunk all or
nothing (seed 001 step 3-4, done set-wise across chunks).

Inside the transaction, in order, each step one statement for every chunk at once: hold the
chunks' conversations against a forget or a revert (``tasks.forget.hold_conversations``: a chunk
of a conversation forgotten meanwhile is dropped, nothing about it written), lock the chunks'
episodes (still pending under this run's claim, else that chunk is another run's
now: a conflict, not a failure), lock the facts the plans act on (active facts of each plan's
own conversation only, else roll back), find each written fact's nearest active duplicate,
let ``tasks.decide`` turn each plan into rows, then write them: end facts, COPY the new ones,
reinforce, COPY the chunks' records, COPY the decision log, mark the episodes consolidated.
One COMMIT makes the batch durable: a chunk is in it whole or not at all, and a crash before
the COMMIT leaves every chunk of the batch to be applied again, nothing half done.

What counts against a chunk is only what belongs to it: the database refusing its data
(``CHUNK_REFUSALS``) or the plan naming facts it may not touch. The batch is then rolled back
and each chunk applied alone, so that only the refused one is counted an attempt; after
``max_attempts`` its episodes are quarantined. Anything else (a bug in slowwave, a lost
connection) propagates: the shard fails loudly or is retried, and no chunk is charged. A
connection lost during COMMIT leaves the outcome unknown: ``read_back`` reads the chunks'
recorded outcomes (chunk ids are derived from the run and the chunk's content, so a retry has
its first try's ids) before anything is applied or charged again.

What apply locks and reads before it decides is ``tasks.apply_locks``; the statements that write
are ``tasks.apply_writes``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from uuid import UUID

import psycopg
import psycopg.errors

from slowwave import sql
from slowwave.models import faultpoints
from slowwave.models.chunk import ApplyResult, ChunkToApply
from slowwave.models.embedding.base import Vectors
from slowwave.models.faultpoints import around
from slowwave.models.ids import conversation_ref
from slowwave.models.plan import Decision, Plan
from slowwave.models.settings import ConsolidationSettings
from slowwave.tasks.apply_locks import (
    IsolationViolation,
    lock_episodes,
    lock_slot_holders,
    lock_targets,
    nearest_duplicates,
    refuse_foreign_targets,
    vanished_targets,
)
from slowwave.tasks.apply_writes import (
    ChunkRecord,
    end_facts,
    evict,
    insert_facts,
    mark_consolidated,
    record_chunks,
    reinforce,
    write_log,
)
from slowwave.tasks.decide import Writes, decide
from slowwave.tasks.forget import hold_conversations

logger = logging.getLogger(__name__)


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


def apply_plans(
    conn: psycopg.Connection,
    chunks: Sequence[ChunkToApply],
    run_id: UUID,
    policy: ConsolidationSettings,
) -> list[ApplyResult]:
    """Apply chunks of distinct conversations in one transaction, each chunk all or nothing:
    every statement runs once for all of them, and one COMMIT makes them durable together.

    A chunk whose episodes another run holds now is recorded as a conflict in the same
    transaction. When the database refuses one chunk's data (or a plan names a fact it may
    not touch), the transaction rolls back and each chunk is applied alone, so that only the
    refused one is charged its attempt. Anything else propagates, nothing applied.
    """
    if not chunks:
        return []
    try:
        with conn.transaction():
            results = _apply(conn, chunks, run_id, policy)
            faultpoints.reached("commit.before", conn)
        faultpoints.reached("commit.after", conn)
        return results
    except CHUNK_REFUSALS as exc:
        if conn.closed or conn.broken:
            raise
        if len(chunks) > 1:  # find the chunk that was refused: each alone
            return [r for chunk in chunks for r in apply_plans(conn, [chunk], run_id, policy)]
        (chunk,) = chunks
        reason = f"apply failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
        return [
            record_failure(conn, chunk.plan, run_id, reason, policy, model_name=chunk.model_name)
        ]


def apply_plan(
    conn: psycopg.Connection,
    plan: Plan,
    vectors: Vectors,
    run_id: UUID,
    policy: ConsolidationSettings,
    *,
    model_name: str | None = None,
) -> ApplyResult:
    """Apply one chunk in its own transaction (``apply_plans`` of one)."""
    (result,) = apply_plans(conn, [ChunkToApply(plan, vectors, model_name)], run_id, policy)
    return result


def record_failure(
    conn: psycopg.Connection,
    plan: Plan,
    run_id: UUID,
    reason: str,
    policy: ConsolidationSettings,
    *,
    model_name: str | None = None,
) -> ApplyResult:
    """Count a failed attempt of the chunk on the episodes this run still holds; quarantine
    them after ``max_attempts``. Holding none of them, it is a conflict, and nothing is
    charged."""
    with conn.transaction():
        if hold_conversations(conn, [plan.conversation_id]):
            return forgotten_result(plan)
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
            record_chunks(conn, run_id, [ChunkRecord(plan, status, model_name, reason)])
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


def read_back(conn: psycopg.Connection, plans: Sequence[Plan]) -> dict[UUID, ApplyResult]:
    """The recorded outcome of each chunk that has one, by chunk id (one statement)."""
    by_id = {plan.chunk_id: plan for plan in plans}
    rows = conn.execute(sql.statement("apply_read_back"), {"chunk_ids": list(by_id)}).fetchall()
    found: dict[UUID, ApplyResult] = {}
    for row in rows:
        chunk, status, error, conversation, episode_ids, gated, *counts = row
        new, reinforce, merge, update, inv, rej = (int(c) for c in counts)
        plan = by_id[chunk]
        found[chunk] = ApplyResult(
            chunk_id=chunk,
            conversation_id=conversation,
            applied=status == "applied",
            episodes=plan.finished_episodes if status == "applied" else len(episode_ids),
            episode_ids=list(episode_ids),
            gated=int(gated),
            inserted=new,
            reinforced=reinforce,
            merged=merge,
            updated=update,
            invalidated=inv,
            rejected=rej,
            error=error,
            quarantined=status == "quarantined",
            conflict=status == "conflict",
        )
    return found


def _conflict(
    conn: psycopg.Connection, plan: Plan, run_id: UUID, reason: str, model_name: str | None
) -> ApplyResult:
    """The episodes are not ours to apply: another run's now. Not the chunk's failure."""
    with conn.transaction():
        if hold_conversations(conn, [plan.conversation_id]):
            return forgotten_result(plan)
        record_chunks(conn, run_id, [ChunkRecord(plan, "conflict", model_name, reason)])
    return _conflict_result(plan, reason)


def forgotten_result(plan: Plan) -> ApplyResult:
    """A chunk of a conversation forgotten while it was in flight: dropped, and named nowhere
    (the log line gives no id)."""
    logger.info("a chunk of a conversation forgotten while it was in flight was dropped")
    return ApplyResult(
        chunk_id=plan.chunk_id,
        conversation_id=plan.conversation_id,
        applied=False,
        forgotten=True,
        episodes=len(plan.episode_ids),
        episode_ids=plan.episode_ids,
    )


def _conflict_result(plan: Plan, reason: str) -> ApplyResult:
    logger.warning(
        "chunk %s of %s left to another run: %s",
        plan.chunk_id,
        conversation_ref(plan.conversation_id),
        reason,
    )
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
    chunks: Sequence[ChunkToApply],
    run_id: UUID,
    policy: ConsolidationSettings,
) -> list[ApplyResult]:
    forgotten = hold_conversations(conn, [c.plan.conversation_id for c in chunks])
    dropped = {c.plan.chunk_id for c in chunks if c.plan.conversation_id in forgotten}
    with around("lock_episodes", conn):
        live, conflicts = lock_episodes(
            conn, [c for c in chunks if c.plan.chunk_id not in dropped], run_id
        )
    with around("lock_targets", conn):
        known = lock_targets(conn, [c.plan for c in live])
        live, vanished = vanished_targets(conn, live, known)
        conflicts += vanished
        refuse_foreign_targets([c.plan for c in live], known)
        holders = lock_slot_holders(conn, [c.plan for c in live], known) if policy.slots else {}
    with around("dedupe", conn):
        nearest = nearest_duplicates(
            conn, live, policy.dedupe_candidates, policy.dedupe_threshold, known
        )
    writes = [
        decide(
            c.plan,
            c.vectors,
            known,
            nearest[i],
            policy.dedupe_threshold,
            slots=holders.get(c.plan.conversation_id, {}) if policy.slots else None,
        )
        for i, c in enumerate(live)
    ]
    plans = [c.plan for c in live]
    with around("invalidate", conn):
        end_facts(conn, plans, writes)
    with around("insert_facts", conn):
        insert_facts(conn, plans, writes, run_id)
    with around("reinforce", conn):
        reinforce(conn, plans, writes)
    with around("record_chunk", conn):
        record_chunks(
            conn,
            run_id,
            [ChunkRecord(c.plan, "applied", c.model_name, None) for c in live]
            + [ChunkRecord(c.plan, "conflict", c.model_name, why) for c, why in conflicts],
        )
    with around("write_log", conn):
        write_log(conn, plans, writes, run_id)
    evicted: Counter[UUID] = Counter()
    if policy.max_active_facts:
        with around("evict", conn):
            evicted = evict(conn, plans, run_id, policy.max_active_facts)
    with around("mark_consolidated", conn):
        mark_consolidated(conn, plans, run_id)
    applied = {
        c.plan.chunk_id: _applied(c.plan, w, evicted[c.plan.chunk_id])
        for c, w in zip(live, writes, strict=True)
    }
    refused = {c.plan.chunk_id: _conflict_result(c.plan, why) for c, why in conflicts}
    refused |= {
        c.plan.chunk_id: forgotten_result(c.plan) for c in chunks if c.plan.chunk_id in dropped
    }
    return [applied.get(c.plan.chunk_id) or refused[c.plan.chunk_id] for c in chunks]


def _applied(plan: Plan, writes: Writes, evicted: int) -> ApplyResult:
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
        evicted=evicted,
        fact_ids=[f.id for f in writes.inserts],
    )
