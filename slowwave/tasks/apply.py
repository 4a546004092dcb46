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
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

import numpy as np
import psycopg
import psycopg.errors

from slowwave import sql
from slowwave.models import faultpoints
from slowwave.models.chunk import ApplyResult
from slowwave.models.embedding.base import Vectors
from slowwave.models.faultpoints import around
from slowwave.models.ids import conversation_ref
from slowwave.models.plan import Decision, Plan
from slowwave.models.settings import Settings
from slowwave.sql.copy import copy_rows
from slowwave.tasks.decide import Known, Writes, decide, ended_targets
from slowwave.tasks.forget import hold_conversations

logger = logging.getLogger(__name__)


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
    ("slot", "text"),
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
    max_active_facts: int = 0  # 0: no cap
    slots: bool = True

    @classmethod
    def of(cls, settings: Settings) -> ApplyPolicy:
        return cls(
            settings.consolidation.dedupe_threshold,
            settings.consolidation.dedupe_candidates,
            settings.consolidation.max_attempts,
            settings.consolidation.max_active_facts,
            settings.consolidation.slots,
        )


@dataclass(frozen=True)
class ChunkToApply:
    """A chunk's plan, the vectors of the facts it writes, and the model that answered it."""

    plan: Plan
    vectors: Vectors
    model_name: str | None = None


def apply_plans(
    conn: psycopg.Connection,
    chunks: Sequence[ChunkToApply],
    run_id: UUID,
    policy: ApplyPolicy,
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
    policy: ApplyPolicy,
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
    policy: ApplyPolicy,
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
            _record_chunks(conn, run_id, [ChunkRecord(plan, status, model_name, reason)])
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
        _record_chunks(conn, run_id, [ChunkRecord(plan, "conflict", model_name, reason)])
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
    conn: psycopg.Connection, chunks: Sequence[ChunkToApply], run_id: UUID, policy: ApplyPolicy
) -> list[ApplyResult]:
    forgotten = hold_conversations(conn, [c.plan.conversation_id for c in chunks])
    dropped = {c.plan.chunk_id for c in chunks if c.plan.conversation_id in forgotten}
    with around("lock_episodes", conn):
        live, conflicts = _lock_episodes(
            conn, [c for c in chunks if c.plan.chunk_id not in dropped], run_id
        )
    with around("lock_targets", conn):
        known = _lock_targets(conn, [c.plan for c in live])
        live, vanished = _vanished_targets(conn, live, known)
        conflicts += vanished
        _refuse_foreign_targets([c.plan for c in live], known)
        holders = _lock_slot_holders(conn, [c.plan for c in live], known) if policy.slots else {}
    with around("dedupe", conn):
        nearest = _nearest_duplicates(conn, live, policy, known)
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
        _end_facts(conn, plans, writes)
    with around("insert_facts", conn):
        _insert_facts(conn, plans, writes, run_id)
    with around("reinforce", conn):
        _reinforce(conn, plans, writes)
    with around("record_chunk", conn):
        _record_chunks(
            conn,
            run_id,
            [ChunkRecord(c.plan, "applied", c.model_name, None) for c in live]
            + [ChunkRecord(c.plan, "conflict", c.model_name, why) for c, why in conflicts],
        )
    with around("write_log", conn):
        _write_log(conn, plans, writes, run_id)
    evicted: Counter[UUID] = Counter()
    if policy.max_active_facts:
        with around("evict", conn):
            evicted = _evict(conn, plans, run_id, policy.max_active_facts)
    with around("mark_consolidated", conn):
        _mark_consolidated(conn, plans, run_id)
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


# ── readers: what the decisions depend on ───────────────────────────────────────────────


def _lock_episodes(
    conn: psycopg.Connection, chunks: Sequence[ChunkToApply], run_id: UUID
) -> tuple[list[ChunkToApply], list[tuple[ChunkToApply, str]]]:
    """Lock every chunk's episodes; split the chunks into those this run may apply and
    conflicts (some episode no longer pending under this run's claim), with the reason."""
    plans = [c.plan for c in chunks]
    locked = {
        row[0]
        for row in conn.execute(
            sql.statement("apply_lock_episodes"),
            {
                "ids": [e for p in plans for e in p.episode_ids],
                "messages_from": [
                    m for p in plans for m in (p.messages_from or [0] * len(p.episode_ids))
                ],
                "conversations": [p.conversation_id for p in plans for _ in p.episode_ids],
                "run_id": run_id,
            },
        ).fetchall()
    }
    live: list[ChunkToApply] = []
    conflicts: list[tuple[ChunkToApply, str]] = []
    for chunk in chunks:
        missing = sum(e not in locked for e in chunk.plan.episode_ids)
        if not missing:
            live.append(chunk)
            continue
        conflicts.append(
            (
                chunk,
                f"{missing} of {len(chunk.plan.episode_ids)} episodes are no longer pending "
                "under this run's claim (consolidated by another run, quarantined, the claim "
                "expired and another run took it, or an earlier commit of this part)",
            )
        )
    return live, conflicts


def _vanished_targets(
    conn: psycopg.Connection, chunks: Sequence[ChunkToApply], known: dict[UUID, Known]
) -> tuple[list[ChunkToApply], list[tuple[ChunkToApply, str]]]:
    """Split off the chunks whose plans act on facts that no longer exist: forgotten or
    reverted while the chunk was in flight. Not the chunk's failure: a conflict, left with its
    conversation's later chunks for a later run, which decides on what holds then. Only a
    target the lock did not find is looked up (rare: the usual batch reads nothing more)."""
    unknown = {
        a.target_id
        for c in chunks
        for a in c.plan.actions
        if a.target_id is not None and a.target_id not in known
    }
    if not unknown:
        return list(chunks), []
    rows = conn.execute(sql.statement("facts_existing"), {"ids": sorted(unknown)}).fetchall()
    gone = unknown - {r[0] for r in rows}
    live: list[ChunkToApply] = []
    conflicts: list[tuple[ChunkToApply, str]] = []
    for chunk in chunks:
        missing = {a.target_id for a in chunk.plan.actions} & gone
        if not missing:
            live.append(chunk)
            continue
        conflicts.append(
            (
                chunk,
                f"{len(missing)} fact(s) it acts on were removed while it was in flight "
                "(forgotten or reverted): left for a later run",
            )
        )
    return live, conflicts


def _lock_targets(conn: psycopg.Connection, plans: Sequence[Plan]) -> dict[UUID, Known]:
    """Lock the facts the plans act on: active facts of each plan's own conversation only."""
    wanted = {
        (a.target_id, p.conversation_id)
        for p in plans
        for a in p.actions
        if a.target_id is not None
    }
    if not wanted:
        return {}
    rows = conn.execute(
        sql.statement("apply_lock_targets"),
        {
            "ids": [fact for fact, _ in wanted],
            "conversations": [conversation for _, conversation in wanted],
        },
    ).fetchall()
    return {r[0]: Known(valid_at=r[1], vector=r[2].to_numpy()) for r in rows}


def _refuse_foreign_targets(plans: Sequence[Plan], known: dict[UUID, Known]) -> None:
    """A plan that acts on a fact that exists but is not an active fact of its own
    conversation: refused (``IsolationViolation``)."""
    missing = sorted(
        {
            (p.conversation_id, str(a.target_id))
            for p in plans
            for a in p.actions
            if a.target_id is not None and a.target_id not in known
        }
    )
    if missing:
        raise IsolationViolation(  # the failure names the conversation; its reason must not
            f"plan acts on {len(missing)} fact(s) that are not active facts of its "
            f"conversation: {[f for _, f in missing]}"
        )


def _lock_slot_holders(
    conn: psycopg.Connection, plans: Sequence[Plan], known: dict[UUID, Known]
) -> dict[str, dict[str, UUID]]:
    """conversation → slot → the active fact holding it, for the slots the plans fill,
    locked; each holder is added to ``known`` (a new value in its slot may update it)."""
    wanted = sorted(
        {(p.conversation_id, a.slot) for p in plans for a in p.actions if a.writes_fact and a.slot}
    )
    if not wanted:
        return {}
    rows = conn.execute(
        sql.statement("apply_slot_holders"),
        {"conversations": [c for c, _ in wanted], "slots": [s for _, s in wanted]},
    ).fetchall()
    holders: dict[str, dict[str, UUID]] = {}
    for fact_id, conversation, slot, valid_at, vector in rows:
        holders.setdefault(conversation, {})[slot] = fact_id
        known.setdefault(fact_id, Known(valid_at=valid_at, vector=vector.to_numpy()))
    return holders


def _nearest_duplicates(
    conn: psycopg.Connection,
    chunks: Sequence[ChunkToApply],
    policy: ApplyPolicy,
    known: dict[UUID, Known],
) -> list[dict[int, tuple[UUID, float]]]:
    """Per chunk: action index → the nearest active duplicate (same conversation) of the fact
    it writes, if any; each duplicate is added to ``known`` (a later action may act on the
    fact a new one merged into)."""
    nearest: list[dict[int, tuple[UUID, float]]] = [{} for _ in chunks]
    origin: list[tuple[int, int]] = []  # vector row → (chunk, action index)
    vectors: list[np.ndarray] = []
    conversations: list[str] = []
    for i, chunk in enumerate(chunks):
        for row, action in enumerate(chunk.plan.writing):
            origin.append((i, action))
            vectors.append(chunk.vectors[row])
            conversations.append(chunk.plan.conversation_id)
    if not vectors:
        return nearest
    rows = conn.execute(
        sql.statement("apply_dedupe"),
        {
            "vectors": vectors,
            "conversations": conversations,
            "excluded": sorted({t for c in chunks for t in ended_targets(c.plan)}),
            "candidates": policy.dedupe_candidates,
            "threshold": policy.dedupe_threshold,
        },
    ).fetchall()
    for ordinal, fact_id, similarity, valid_at, vector in rows:  # best first per ordinal
        i, action = origin[int(ordinal) - 1]
        nearest[i].setdefault(action, (fact_id, float(similarity)))
        known.setdefault(fact_id, Known(valid_at=valid_at, vector=vector.to_numpy()))
    return nearest


# ── writers: one set-based statement each, for every chunk at once ──────────────────────


def _end_facts(conn: psycopg.Connection, plans: Sequence[Plan], writes: Sequence[Writes]) -> None:
    ends = [
        (fact, at, plan.conversation_id)
        for plan, w in zip(plans, writes, strict=True)
        for fact, at in w.endings.items()
    ]
    if not ends:
        return
    cur = conn.execute(
        sql.statement("apply_invalidate"),
        {
            "fact_ids": [f for f, _, _ in ends],
            "times": [t for _, t, _ in ends],
            "conversations": [c for _, _, c in ends],
        },
    )
    if cur.rowcount != len(ends):
        raise IsolationViolation(f"ended {cur.rowcount} of {len(ends)} facts")


def _insert_facts(
    conn: psycopg.Connection, plans: Sequence[Plan], writes: Sequence[Writes], run_id: UUID
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
            f.slot,
        )
        for plan, w in zip(plans, writes, strict=True)
        for f in w.inserts
    ]
    if rows:
        copy_rows(conn, "semantic_memory", FACT_COLUMNS, rows)


def _reinforce(conn: psycopg.Connection, plans: Sequence[Plan], writes: Sequence[Writes]) -> None:
    pairs = [
        (fact, episode, plan.conversation_id)
        for plan, w in zip(plans, writes, strict=True)
        for fact, episode in w.reinforcements
    ]
    if not pairs:
        return
    conn.execute(
        sql.statement("apply_reinforce"),
        {
            "fact_ids": [f for f, _, _ in pairs],
            "episode_ids": [e for _, e, _ in pairs],
            "conversations": [c for _, _, c in pairs],
        },
    )


@dataclass(frozen=True)
class ChunkRecord:
    """A chunk's row in ``consolidation_chunks``: what became of it."""

    plan: Plan
    status: str
    model_name: str | None
    error: str | None


CHUNK_COLUMNS = (
    ("id", "uuid"),
    ("run_id", "uuid"),
    ("conversation_id", "text"),
    ("episode_ids", "uuid[]"),
    ("status", "text"),
    ("model", "text"),
    ("prompt_tokens", "int4"),
    ("completion_tokens", "int4"),
    ("cached_tokens", "int4"),
    ("error", "text"),
)


def _record_chunks(conn: psycopg.Connection, run_id: UUID, records: Sequence[ChunkRecord]) -> None:
    copy_rows(
        conn,
        "consolidation_chunks",
        CHUNK_COLUMNS,
        [
            (
                r.plan.chunk_id,
                run_id,
                r.plan.conversation_id,
                r.plan.episode_ids,
                r.status,
                r.model_name,
                r.plan.prompt_tokens,
                r.plan.completion_tokens,
                r.plan.cached_tokens,
                r.error,
            )
            for r in records
        ],
    )


def _write_log(
    conn: psycopg.Connection, plans: Sequence[Plan], writes: Sequence[Writes], run_id: UUID
) -> None:
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
        for plan, w in zip(plans, writes, strict=True)
        for e in w.log
    ]
    if rows:
        copy_rows(conn, "decision_log", LOG_COLUMNS, rows)


def _evict(
    conn: psycopg.Connection, plans: Sequence[Plan], run_id: UUID, cap: int
) -> Counter[UUID]:
    """Retire what the plans' conversations hold over ``cap`` active facts; count per chunk."""
    rows = conn.execute(
        sql.statement("apply_evict"),
        {
            "conversations": [p.conversation_id for p in plans],
            "chunk_ids": [p.chunk_id for p in plans],
            "times": [p.event_time for p in plans],
            "cap": cap,
            "run_id": run_id,
        },
    ).fetchall()
    return Counter(row[0] for row in rows)


def _mark_consolidated(conn: psycopg.Connection, plans: Sequence[Plan], run_id: UUID) -> None:
    if not plans:
        return
    conn.execute(
        sql.statement("apply_mark_consolidated"),
        {
            "run_id": run_id,
            "gated": [e for p in plans for e in p.gated_ids],
            "ids": [e for p in plans for e in p.episode_ids],
            "messages_to": [
                m for p in plans for m in (p.messages_to or [None] * len(p.episode_ids))
            ],
        },
    )
