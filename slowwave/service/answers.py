"""What the operations answer: the same typed records to Python, the CLI, REST and MCP."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field

from slowwave.models.category import Category
from slowwave.models.episode import EpisodicHit
from slowwave.models.keys import ApiKey


class Rejected(BaseModel):
    index: int = Field(description="The message's place in the request, 0 for the first.")
    message_id: str | None
    reason: str


class Recorded(BaseModel):
    conversation_id: str
    received: int
    recorded: int = Field(description="Messages stored by this request.")
    already_recorded: int = Field(description="Messages stored before (by message id): kept.")
    rejected: list[Rejected]
    episodes_new: int
    episodes_grown: int


class Hit(BaseModel):
    id: UUID
    category: Category
    fact: str
    score: float
    valid_at: datetime
    invalid_at: datetime | None
    sources: int
    ranks: dict[str, int | None] = Field(description="The fact's rank in each channel.")


class Ranked(BaseModel):
    """A place in a fused list: a fact or an episodic memory, by its id."""

    kind: Literal["fact", "memory"]
    id: UUID
    score: float = Field(
        description="Reciprocal rank fusion of its rank in its own list, or the reranker's "
        "score when the search reranked."
    )


class SearchAnswer(BaseModel):
    """Facts and episodic memories side by side (seed 001's raw answer, in this API's names)."""

    conversation_id: str
    query: str
    hits: list[Hit] = Field(description="The facts, best first.")
    memories: list[EpisodicHit] = Field(
        default_factory=list,
        description="The episodes (pending and consolidated) whose messages answer best.",
    )
    ranked: list[Ranked] | None = Field(
        default=None,
        description="When asked (fused): facts and memories in one list, best first, at most "
        "k long, each scored by its rank in its own list (by the reranker's score when the "
        "search reranked); an item that reaches no episode the "
        "items above it have not comes after every item that does.",
    )
    markdown: str | None = None


def fuse(
    facts: Sequence[tuple[UUID, Sequence[UUID]]],
    memories: Sequence[EpisodicHit],
    k: int,
    rrf_k: int,
    scores: Mapping[UUID, float] | None = None,
) -> list[Ranked]:
    """Facts (each with its source episodes) and memories in one list, the best ``k``, by
    reciprocal rank fusion of their own ranks, or by ``scores`` (a reranker's, one scale for
    both kinds) when given. A memory counts for its episode and a fact for its sources: an
    item that brings no episode the items above it have not brought comes after every item
    that does, so that a small list reaches as many episodes as it can, and then fills the
    places left with what it passed over, in its order (another fact of an episode already
    reached carries other messages of it: on LoCoMo the evidence turns the list carries at @10
    go from 0.721 to 0.764, the sessions it reaches unchanged; left out, the list was 9.3 long
    on average). A memory and a fact of the same score: the memory first, whose excerpt
    carries the messages a fact of its episode was drawn from (the turns at @10 went from
    0.557 to 0.721, the sessions unchanged)."""

    def scored(item: UUID, rank: int) -> float:
        return scores[item] if scores is not None else 1 / (rrf_k + rank)

    ranked = [(scored(m.id, n), "memory", m.id, {m.id}) for n, m in enumerate(memories, 1)]
    ranked += [(scored(i, n), "fact", i, set(src)) for n, (i, src) in enumerate(facts, 1)]
    ranked.sort(key=lambda r: -r[0])  # stable: memories before facts of the same rank
    chosen: list[Ranked] = []
    passed_over: list[Ranked] = []
    reached: set[UUID] = set()
    for score, kind, item, episodes in ranked:
        if len(chosen) == k:
            break
        if episodes and episodes <= reached:
            passed_over.append(Ranked(kind=kind, id=item, score=score))
            continue
        chosen.append(Ranked(kind=kind, id=item, score=score))
        reached |= episodes
    return (chosen + passed_over)[:k]


class ContextAnswer(BaseModel):
    conversation_id: str
    context: str


class Status(BaseModel):
    conversation_id: str
    episodes_pending: int
    episodes_consolidated: int
    episodes_quarantined: int
    oldest_pending_at: datetime | None = Field(
        description="When the oldest pending episode was recorded: how long it has waited."
    )
    last_consolidated_at: datetime | None
    last_message_at: datetime | None
    facts_active: int
    facts_invalidated: int


PurgeState = Literal["done", "queued", "skipped", "incomplete"]


class Forgotten(BaseModel):
    """What a forget removed, and whether the bytes are gone from the database's files yet."""

    kind: Literal["forget_conversation", "forget_fact"]
    target_sha256: str = Field(description="The SHA-256 of what was forgotten (the tombstone).")
    rows: dict[str, int] = Field(description="Rows removed, per table.")
    reject_lines: int = Field(description="Lines removed from the rejects reports.")
    purge: PurgeState = Field(
        description="done: the tables were rewritten and the write-ahead log moved on before "
        "this answer; queued: they will be, right after it (GET the conversation to see when); "
        "skipped: purge=false was asked; incomplete: see purge_note."
    )
    purge_note: str | None = None
    export_files: int = Field(description="Parquet files of slowwave's exports rewritten.")
    export_notes: int = Field(description="Exports that could not be reached (the log names them).")


class Tombstone(BaseModel):
    """A conversation that was forgotten: when, and whether its bytes are purged yet."""

    conversation_id: str
    forgotten_at: datetime
    purged: bool
    purged_at: datetime | None


class Undeleted(BaseModel):
    """A fact that holds again, and the successors that replaced it, ended where it began."""

    fact_id: UUID
    successors_ended: list[UUID]


class NewKey(BaseModel):
    key: str = Field(description="Shown this once: only its SHA-256 is kept.")
    record: ApiKey


__all__ = [
    "ContextAnswer",
    "Forgotten",
    "Hit",
    "NewKey",
    "PurgeState",
    "Recorded",
    "Rejected",
    "SearchAnswer",
    "Status",
    "Tombstone",
    "Undeleted",
]


class RunStarted(BaseModel):
    """A run a key asked for: its id at once (``GET /v1/runs/{id}`` follows it) and where it
    runs."""

    run_id: UUID
    conversation_id: str
    started_in: Literal["prefect", "server", "here"] = Field(
        description="prefect: a flow run of the nightly deployment (flow_run_id); server: the "
        "server's own worker; here: this process, done before the answer."
    )
    flow_run_id: str | None = None


class RunState(BaseModel):
    """A run as the tenant that asked for it sees it: its status and what it committed."""

    run_id: UUID
    kind: str
    status: str = Field(description="queued (not started yet), running, completed, failed, …")
    started_at: datetime | None
    finished_at: datetime | None
    episodes_consolidated: int = 0
    episodes_quarantined: int = 0
    facts_inserted: int = 0
    facts_reinforced: int = 0
    facts_updated: int = 0
    facts_invalidated: int = 0
    error: str | None = None
    left_undone: dict[str, int] = Field(
        default_factory=dict,
        description="Once the run ended: the episodes of its conversations it left undone, by "
        "reason, only those that count: `open` (still open: the conversation went on after the "
        "request), `held` (by another run), `not_due`, `over_cap`, `deferred` (behind a failed "
        "chunk), `over_budget` (the run or its tenant had spent its token budget), `conflicted` "
        "(taken over by another run), `forgotten`, `quarantined`.",
    )
    note: str | None = Field(
        default=None,
        description="Once the run ended: one sentence on what it left undone and why "
        '("nothing left undone" when it took everything).',
    )
