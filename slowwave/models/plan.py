"""The guarded plan: what apply will do for one chunk, with real ids and reasons.

The model's answer (``models.consolidation.ConsolidationOutput``) speaks in short ids; the
guard turns it into this, so nothing the model invented can reach the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from uuid import UUID

from pydantic import BaseModel, Field

from slowwave.models.category import Category
from slowwave.models.consolidation import FactAction
from slowwave.models.llm.base import ModelAnswer


class Decision(StrEnum):
    """What apply did with one proposed action: the decision log's ``action``."""

    new = "new"
    reinforce = "reinforce"
    update = "update"
    invalidate = "invalidate"
    merge = "merge"
    rejected = "rejected"


WRITING = (FactAction.new, FactAction.update)  # the actions that write a fact


class PlannedAction(BaseModel):
    """One action apply takes."""

    action: FactAction
    proposed: FactAction = Field(description="What the model asked for, before the guard.")
    target_id: UUID | None = Field(
        default=None, description="The existing fact acted on (reinforce, update, invalidate)."
    )
    target_ref: int | None = Field(
        default=None,
        description="Or the fact an earlier action of this plan writes (its index in "
        "``Plan.actions``): the answer named it N1, N2, ...",
    )
    category: Category | None = None
    fact: str | None = None
    keywords: list[str] = Field(default_factory=list)
    slot: str | None = Field(
        default=None,
        description="The single-valued attribute the fact fills (``identity:location:ana``): "
        "at most one active fact of a conversation holds a slot.",
    )
    proposed_fact: str | None = Field(
        default=None,
        description="The model's own sentence, when the fact written is another (a fact given "
        "to the speaker who said it, a gray-zone merge's merged sentence): what the decision log "
        "records as proposed.",
    )
    gray_zone: float | None = Field(
        default=None,
        description="A gray-zone merge: the cosine of the new fact and the known fact it was "
        "judged the same as (the action updates that fact with the merged sentence).",
    )
    second_look: bool = Field(
        default=False,
        description="Stated by the second look (``tasks.second_look``), not the chunk's answer.",
    )
    episode_ids: list[UUID] = Field(description="The episodes that evidence this action.")
    cited: bool = Field(
        default=True,
        description="False: the answer cited no episode; the evidence is the chunk episode "
        "most similar to the fact, attributed once the vectors exist.",
    )
    event_time: datetime = Field(description="End of the latest evidence episode.")
    reason: str | None = Field(default=None, description="Why the guard changed it, if it did.")

    @property
    def writes_fact(self) -> bool:
        return self.action in WRITING

    @property
    def target_key(self) -> UUID | int | None:
        """What the action acts on: an existing fact's id, or an earlier action's index."""
        return self.target_id if self.target_id is not None else self.target_ref

    def add_reason(self, note: str) -> None:
        """``note`` after the reasons already given (each stage that changes the action says
        why, and none overwrites another's)."""
        self.reason = f"{self.reason}; {note}" if self.reason else note


class Rejection(BaseModel):
    """Something the model proposed that the guard refused, and why."""

    proposed: str
    fact: str | None = None
    target_id: UUID | None = None
    reason: str
    ungrounded: str | None = Field(
        default=None, description="The span of the fact its sources do not give, if that is why."
    )

    @classmethod
    def of(cls, action: PlannedAction, reason: str) -> Rejection:
        """A planned action refused after all (another action of the chunk wins over it)."""
        return cls(
            proposed=action.proposed, fact=action.fact, target_id=action.target_id, reason=reason
        )


def renumber_references(before: Sequence[PlannedAction], kept: Sequence[PlannedAction]) -> None:
    """Point the references to earlier actions (``target_ref``) of ``kept``, the actions of
    ``before`` left in their order, at the same actions' new places. None of ``kept`` may name
    an action that was left out."""
    place = {id(a): i for i, a in enumerate(kept)}
    for action in kept:
        if action.target_ref is not None:
            action.target_ref = place[id(before[action.target_ref])]


class Plan(BaseModel):
    """Everything apply needs for one chunk."""

    chunk_id: UUID
    conversation_id: str
    episode_ids: list[UUID] = Field(description="All episodes of the chunk, gated ones included.")
    gated_ids: list[UUID] = Field(default_factory=list)
    messages_from: list[int] = Field(
        default_factory=list,
        description="Per episode (in ``episode_ids`` order): the first message this chunk "
        "shows; apply checks it is where the episode's consolidation stands.",
    )
    messages_to: list[int | None] = Field(
        default_factory=list,
        description="Per episode: where a part that does not finish its episode leaves it; "
        "None where the chunk finishes the episode.",
    )
    actions: list[PlannedAction] = Field(default_factory=list)
    rejections: list[Rejection] = Field(default_factory=list)
    event_time: datetime = Field(description="End of the chunk's latest episode.")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = Field(
        default=0, description="Of prompt_tokens, those the engine's prefix cache served."
    )
    model_calls: int = Field(
        default=0, description="Requests it made: its own, a second look's, a change check's."
    )
    refusals: int = Field(default=0, description="429s and 503s its requests met first.")
    waited_s: float = Field(default=0.0, description="Seconds they waited those out.")

    def charge(self, answer: ModelAnswer, *, calls: int = 1) -> None:
        """Add what a model answer for this chunk cost (its own, a second look's, a change
        check's) to the chunk's tokens and waits: the run counts them when the chunk is
        applied. ``calls``: 0 for this chunk's share of a request another chunk's plan counts
        (``shares``)."""
        self.prompt_tokens += answer.prompt_tokens
        self.completion_tokens += answer.completion_tokens
        self.cached_tokens += answer.cached_tokens
        self.model_calls += calls
        self.refusals += answer.refusals
        self.waited_s += answer.waited_s

    @property
    def writing(self) -> list[int]:
        """Indexes of the actions that write a fact: the rows of the plan's vectors."""
        return [i for i, a in enumerate(self.actions) if a.writes_fact]

    @property
    def finished_episodes(self) -> int:
        """Episodes this chunk finishes (a part that leaves its episode half done: none)."""
        if not self.messages_to:
            return len(self.episode_ids)
        return sum(to is None for to in self.messages_to)
