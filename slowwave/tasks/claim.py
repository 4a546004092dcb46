"""claim: take the due conversations' pending episodes for one run, cut into chunks.

A claim is a lease (``claimed_by`` / ``claimed_until``) written in one statement, so it
survives across connections and Ray workers; a crashed run's lease expires and the work is
taken up again. Conversations are claimed whole; see ``sql/statements/claim.sql``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import dict_row

from slowwave import sql
from slowwave.models import faultpoints
from slowwave.models.episode import Episode, Message
from slowwave.models.settings import ConsolidationSettings, IngestSettings, Settings
from slowwave.tasks.chunking import ChunkBudget, as_episodes, pack

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClaimPolicy:
    """One run's view of what a claim takes and for how long: the consolidation group (the
    nightly rule's thresholds, the lease, the cap a run takes, the chunk size) and ingest's
    (an episode whose last message is younger than the segmentation gap is still open: its
    conversation may go on in it, and no claim takes it yet)."""

    consolidation: ConsolidationSettings
    ingest: IngestSettings
    # only conversations with no episode that ended within the segmentation gap: the soon
    # deployment's, which leaves a conversation that is still talking for later
    quiet: bool = False

    @classmethod
    def of(cls, settings: Settings) -> ClaimPolicy:
        return cls(consolidation=settings.consolidation, ingest=settings.ingest)

    @property
    def open_s(self) -> int:
        return self.ingest.segment_gap_s


@dataclass
class ConversationWork:
    """One claimed conversation: its pending episodes, oldest first, in chunks."""

    conversation_id: str
    chunks: list[list[Episode]]

    quarantined: int = 0  # episodes that cannot be cut to fit the budget, quarantined

    @property
    def episodes(self) -> int:
        """Distinct episodes (the parts of a long one count once)."""
        return len({e.id for chunk in self.chunks for e in chunk})


def claim(
    conn: psycopg.Connection,
    run_id: UUID,
    policy: ClaimPolicy,
    *,
    conversations: Sequence[str] | None = None,
    everything: bool = False,
    budget: ChunkBudget | None = None,
    shard: int = 0,
    max_conversations: int | None = None,
) -> list[ConversationWork]:
    """Claim due conversations for shard ``shard`` of ``run_id`` and commit the claim; cut each
    into chunks within ``budget`` (default: ``chunk_size`` episodes, no token limit).

    ``max_conversations``: the most this claim takes (default: the policy's cap for a run).
    The run's other shards may claim at the same time; none takes what another holds.

    ``everything``: every pending episode of the conversations is due (a backfill, or a run
    that names its conversations), not only those the nightly rule makes due. An episode an
    earlier part left half done resumes at its first pending message.
    """
    budget = budget or ChunkBudget(policy.consolidation.chunk_size)
    cap = max_conversations
    if cap is None:
        cap = policy.consolidation.claim_max_conversations
    rows = _claim_rows(conn, run_id, policy, conversations, everything, shard, cap)
    faultpoints.reached("claim.after", conn)
    by_conversation: dict[str, list[Episode]] = {}
    offsets: dict[UUID, int] = {}
    for row in rows:
        episode = Episode(
            id=row["id"],
            conversation_id=row["conversation_id"],
            external_key=row["external_key"],
            messages=[Message.model_validate(m) for m in row["messages"]],
            summary=row["summary"],
            surprise=row["surprise"],
            start_at=row["start_at"],
            end_at=row["end_at"],
        )
        by_conversation.setdefault(episode.conversation_id, []).append(episode)
        if row["consolidated_messages"]:
            offsets[episode.id] = row["consolidated_messages"]
    work: list[ConversationWork] = []
    refused: dict[UUID, str] = {}
    for conversation_id, episodes in sorted(
        by_conversation.items(), key=lambda kv: (min(e.start_at for e in kv[1]), kv[0])
    ):
        before = len(refused)
        chunks = [as_episodes(c) for c in pack(episodes, budget, offsets, refused)]
        work.append(ConversationWork(conversation_id, chunks, len(refused) - before))
    if refused:
        quarantine(conn, run_id, refused)
    return work


# Claims in a row that may each lose conversations to runs claiming at the same moment.
CLAIM_ROUNDS = 8


def _claim_rows(
    conn: psycopg.Connection,
    run_id: UUID,
    policy: ClaimPolicy,
    conversations: Sequence[str] | None,
    everything: bool,
    shard: int,
    cap: int,
) -> list[dict[str, Any]]:
    """The claimed episodes' rows, up to ``cap`` conversations.

    A conversation the statement locked may have been claimed by a run that committed after
    the statement's snapshot: it comes back empty, and the room it took under the cap would
    be lost for this run. Another round, with a fresh snapshot, claims the next due ones
    instead; each round commits what it claimed. A conversation the round took only in part
    (``give_back_split``) is given back in the same transaction, and counts as lost."""
    rows: list[dict[str, Any]] = []
    taken: list[str] = []
    for _ in range(CLAIM_ROUNDS):
        params = _params(run_id, policy, conversations, everything)
        params["max_conversations"] = cap - len(taken)
        params["taken"] = taken
        params["shard"] = shard
        with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
            faultpoints.reached("claim.before", conn)
            got = cur.execute(sql.statement("claim"), params).fetchall()
            claimed = [r for r in got if r["id"] is not None]
            split = give_back_split(
                conn, run_id, shard, sorted({r["conversation_id"] for r in claimed})
            )
        locked = int(got[0]["locked"])
        claimed = [r for r in claimed if r["conversation_id"] not in split]
        won = {r["conversation_id"] for r in claimed}
        rows += claimed
        taken += sorted(won)
        if len(won) == locked or len(taken) >= cap:
            break
    return rows


def give_back_split(
    conn: psycopg.Connection, run_id: UUID, shard: int, conversations: Sequence[str]
) -> set[str]:
    """Give back, within the caller's transaction, the conversations of ``conversations`` that
    another claimer holds in part, or whose earlier episodes a revert returned to pending
    (both committed after this claim's snapshot); return them."""
    if not conversations:
        return set()
    rows = conn.execute(
        sql.statement("claim_give_back_split"),
        {"conversations": list(conversations), "run_id": run_id, "shard": shard},
    ).fetchall()
    given_back = {row[0] for row in rows}
    if given_back:
        logger.warning(
            "gave back %d conversation(s) another claimer holds, or with earlier episodes "
            "pending again after a revert",
            len(given_back),
        )
    return given_back


def quarantine(conn: psycopg.Connection, run_id: UUID, reasons: dict[UUID, str]) -> None:
    """Quarantine episodes that can never be consolidated as they are, with the reason."""
    logger.warning("quarantined %d episode(s) that cannot be cut to fit", len(reasons))
    with conn.transaction():
        conn.execute(
            sql.statement("quarantine"),
            {"run_id": run_id, "ids": list(reasons), "reasons": list(reasons.values())},
        )


@dataclass(frozen=True)
class Due:
    """What a claim would take now: due conversations (up to the cap) and their episodes."""

    conversations: int
    episodes: int


def count_due(
    conn: psycopg.Connection,
    run_id: UUID,
    policy: ClaimPolicy,
    *,
    conversations: Sequence[str] | None = None,
    everything: bool = False,
) -> Due:
    """Count, without claiming or reading episodes, what is due for ``run_id`` (up to the
    policy's cap): a run plans its shards from it."""
    row = conn.execute(
        sql.statement("due_count"), _params(run_id, policy, conversations, everything)
    ).fetchone()
    return Due(int(row[0]), int(row[1])) if row is not None else Due(0, 0)


@dataclass(frozen=True)
class LeftPending:
    """Pending episodes a run's shards did not take, by reason."""

    held: int  # under another run's live lease
    not_due: int  # their conversation is not due yet
    # due, but not taken: beyond the run's claim_max_conversations, or due only after the run
    # planned its shards
    over_cap: int
    # still open: the conversation may go on in them (no request closed them)
    open: int = 0
    # quarantined, in the run's conversations (all of them for a run that names none)
    quarantined: int = 0


def left_pending(
    conn: psycopg.Connection,
    run_id: UUID,
    policy: ClaimPolicy,
    *,
    conversations: Sequence[str] | None = None,
    everything: bool = False,
) -> LeftPending:
    """What ``run_id`` left pending once its shards are done, counted by the rule that
    claimed."""
    row = conn.execute(
        sql.statement("claim_left_pending"), _params(run_id, policy, conversations, everything)
    ).fetchone()
    if row is None:
        return LeftPending(0, 0, 0)
    return LeftPending(*(int(n) for n in row))


def close_open(conn: psycopg.Connection, conversations: Sequence[str], open_s: int) -> int:
    """Close, and commit, the open episodes of ``conversations`` (those whose last message is
    younger than ``open_s`` seconds, never claimed): a consolidation asked for explicitly takes
    them now, and a message recorded afterwards starts the next episode. Committed before any
    claim, so a run that dies after it leaves them closed and due for the next run; return how
    many were closed (0 when none was open)."""
    if not conversations:
        return 0
    with conn.transaction():
        cur = conn.execute(
            sql.statement("episodes_close"),
            {"conversations": list(conversations), "open_s": open_s},
        )
        closed = cur.rowcount
    if closed:
        logger.info("closed %d open episode(s) of %d conversation(s)", closed, len(conversations))
    return closed


def _params(
    run_id: UUID, policy: ClaimPolicy, conversations: Sequence[str] | None, everything: bool
) -> dict[str, object]:
    return {
        "run_id": run_id,
        "threshold": policy.consolidation.episode_threshold,
        "flashbulb": policy.consolidation.flashbulb_surprise,
        "due_after_s": policy.consolidation.due_after_s,
        "open_s": policy.open_s,
        "quiet_s": policy.open_s if policy.quiet else None,
        "everything": everything,
        "lease_s": policy.consolidation.claim_lease_s,
        "max_conversations": policy.consolidation.claim_max_conversations,
        "conversations": list(conversations) if conversations is not None else None,
        "taken": [],
        "shard": 0,
    }


def renew(conn: psycopg.Connection, run_id: UUID, lease_s: int) -> int:
    """Extend the lease of what ``run_id`` still holds; return how many episodes."""
    with conn.transaction():
        cur = conn.execute(sql.statement("renew_leases"), {"run_id": run_id, "lease_s": lease_s})
    return cur.rowcount


def release(conn: psycopg.Connection, *run_ids: UUID) -> int:
    """Give back what the runs claimed but did not consolidate; return how many episodes."""
    with conn.transaction():
        cur = conn.execute(sql.statement("release"), {"run_ids": list(run_ids)})
    return cur.rowcount
