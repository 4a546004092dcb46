"""What apply writes for a batch of chunks: one set-based statement each, for every chunk at
once. Facts ended, new facts (COPY), reinforcements, the chunks' records (COPY), the decision
log (COPY), the facts retired over a conversation's cap, and the episodes marked consolidated.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

import psycopg

from slowwave import sql
from slowwave.models.plan import Plan
from slowwave.sql.copy import copy_rows
from slowwave.tasks.apply_locks import IsolationViolation
from slowwave.tasks.decide import Writes

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


def end_facts(conn: psycopg.Connection, plans: Sequence[Plan], writes: Sequence[Writes]) -> None:
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


def insert_facts(
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


def reinforce(conn: psycopg.Connection, plans: Sequence[Plan], writes: Sequence[Writes]) -> None:
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
    ("model_calls", "int4"),
    ("error", "text"),
)


def record_chunks(conn: psycopg.Connection, run_id: UUID, records: Sequence[ChunkRecord]) -> None:
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
                r.plan.model_calls,
                r.error,
            )
            for r in records
        ],
    )


def write_log(
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


def evict(conn: psycopg.Connection, plans: Sequence[Plan], run_id: UUID, cap: int) -> Counter[UUID]:
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


def mark_consolidated(conn: psycopg.Connection, plans: Sequence[Plan], run_id: UUID) -> None:
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
