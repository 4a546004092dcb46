"""What apply locks and reads before it decides, for every chunk of a batch at once: the chunks'
episodes (still pending under this run's claim), the facts the plans act on (active facts of
each plan's own conversation only, else ``IsolationViolation``), the facts holding the slots they
fill, and each written fact's nearest active duplicate.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import numpy as np
import psycopg

from slowwave import sql
from slowwave.models.chunk import ChunkToApply
from slowwave.models.fact import other_numbers, said
from slowwave.models.plan import Plan
from slowwave.tasks.decide import Known, ended_targets


class IsolationViolation(RuntimeError):
    """The plan names a fact that is not an active fact of its conversation."""


def lock_episodes(
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


def vanished_targets(
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


def lock_targets(conn: psycopg.Connection, plans: Sequence[Plan]) -> dict[UUID, Known]:
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
    return {r[0]: Known(valid_at=r[1], vector=r[2].to_numpy(), fact=r[3]) for r in rows}


def refuse_foreign_targets(plans: Sequence[Plan], known: dict[UUID, Known]) -> None:
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


def lock_slot_holders(
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
    for fact_id, conversation, slot, valid_at, vector, stored in rows:
        holders.setdefault(conversation, {})[slot] = fact_id
        known.setdefault(fact_id, Known(valid_at=valid_at, vector=vector.to_numpy(), fact=stored))
    return holders


def nearest_duplicates(
    conn: psycopg.Connection,
    chunks: Sequence[ChunkToApply],
    candidates: int,
    threshold: float,
    known: dict[UUID, Known],
) -> list[dict[int, tuple[UUID, float]]]:
    """Per chunk: action index → the nearest active duplicate (same conversation, among the
    ``candidates`` nearest, at least ``threshold`` similar, or saying the same sentence under
    another category or keywords: similarity 1; none that states other numbers) of the fact
    it writes, if any; each
    duplicate is added to ``known`` (a later action may act on the
    fact a new one merged into)."""
    nearest: list[dict[int, tuple[UUID, float]]] = [{} for _ in chunks]
    origin: list[tuple[int, int]] = []  # vector row → (chunk, action index)
    vectors: list[np.ndarray] = []
    conversations: list[str] = []
    sentences: list[str] = []
    for i, chunk in enumerate(chunks):
        for row, action in enumerate(chunk.plan.writing):
            origin.append((i, action))
            vectors.append(chunk.vectors[row])
            conversations.append(chunk.plan.conversation_id)
            sentences.append(said(chunk.plan.actions[action].fact or ""))
    if not vectors:
        return nearest
    rows = conn.execute(
        sql.statement("apply_dedupe"),
        {
            "vectors": vectors,
            "conversations": conversations,
            "said": sentences,
            "excluded": sorted({t for c in chunks for t in ended_targets(c.plan)}),
            "candidates": candidates,
            "threshold": threshold,
        },
    ).fetchall()
    for ordinal, fact_id, similarity, valid_at, vector, stored in rows:  # best first per ordinal
        i, action = origin[int(ordinal) - 1]
        if other_numbers(chunks[i].plan.actions[action].fact or "", stored):
            continue  # "five sessions" is no duplicate of "three sessions"
        nearest[i].setdefault(action, (fact_id, float(similarity)))
        known.setdefault(fact_id, Known(valid_at=valid_at, vector=vector.to_numpy(), fact=stored))
    return nearest
