"""A chunk on its way from claim to apply: what each stage hands the next.

``OpenChunk`` (gate and predict done, the prompt built) goes to the model; ``PreparedChunk``
(answer parsed, guarded, embedded) goes to apply, as a ``ChunkToApply`` when nothing failed;
``ApplyResult`` says what apply did.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from slowwave.models.embedding.base import Vectors
from slowwave.models.episode import Episode
from slowwave.models.fact import Fact
from slowwave.models.llm.base import GenerationRequest
from slowwave.models.plan import Plan


@dataclass
class OpenChunk:
    """A chunk between predict and the model's answer: its plan, what the model is shown."""

    plan: Plan
    visible: list[Episode]  # the episodes the gate kept
    facts: list[Fact]  # the related facts shown to the model
    request: GenerationRequest | None  # None: the gate consolidated every episode
    episode_vectors: Vectors | None = None  # of ``visible``: evidence is attributed by them


@dataclass
class PreparedChunk:
    """A chunk ready for apply: its plan and vectors, or the reason it failed before apply."""

    plan: Plan
    vectors: Vectors
    error: str | None = None
    held: str | None = None  # why it is held for review instead of applied (tasks.guard)


@dataclass(frozen=True)
class ChunkToApply:
    """A chunk's plan, the vectors of the facts it writes, and the model that answered it."""

    plan: Plan
    vectors: Vectors
    model_name: str | None = None


@dataclass
class ApplyResult:
    """What applying one chunk did (or why it did nothing)."""

    chunk_id: UUID
    conversation_id: str
    applied: bool
    episodes: int = 0  # episodes finished (a part that does not finish its episode: none)
    episode_ids: list[UUID] = field(default_factory=list)
    gated: int = 0
    inserted: int = 0
    reinforced: int = 0
    merged: int = 0
    updated: int = 0
    invalidated: int = 0
    rejected: int = 0
    evicted: int = 0  # active facts retired over the conversation's cap
    error: str | None = None
    quarantined: bool = False
    conflict: bool = False  # another run holds the episodes: not a failure
    forgotten: bool = False  # its conversation was forgotten: dropped, nothing recorded
    fact_ids: list[UUID] = field(default_factory=list)
