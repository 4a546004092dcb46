"""Episodes: what happened in one stretch of a conversation (episodic memory)."""

from __future__ import annotations

import hashlib
from datetime import datetime
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, Field

from slowwave.models.tenant import conversation_key


class Message(BaseModel):
    """One message of an episode's transcript."""

    speaker: str = Field(description="Who said it: a name or a role (user, assistant).")
    text: str = Field(description="What was said; image captions are kept as text.")
    message_id: str | None = Field(default=None, description="The source's id of the message.")
    at: datetime | None = Field(default=None, description="When it was said, when known.")


class Episode(BaseModel):
    """An episode as the consolidation stages see it."""

    id: UUID
    conversation_id: str
    external_key: str = Field(description="Stable key of the source; re-ingesting adds nothing.")
    messages: list[Message]
    summary: str | None = None
    surprise: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="How unexpected the episode was, 0..1: its source's, or, when it gave none, "
        "its novelty against the conversation's facts, computed when a chunk holding it opens.",
    )
    start_at: AwareDatetime
    end_at: AwareDatetime
    messages_from: int = Field(
        default=0,
        ge=0,
        description="A part of a long episode: the index, in the stored episode, of the first "
        "message shown; the ones before it were consolidated by an earlier part.",
    )
    messages_to: int | None = Field(
        default=None,
        ge=0,
        description="A part that does not finish its episode: once applied, the stored "
        "episode's messages before this index are consolidated. None: the part (or the whole "
        "episode) finishes it.",
    )

    def in_tenant(self, tenant: str) -> Episode:
        """This episode as ``tenant``'s: its conversation and its source key (unique across
        tenants) made the tenant's (``models.tenant``)."""
        return self.model_copy(
            update={
                "conversation_id": conversation_key(self.conversation_id, tenant),
                "external_key": conversation_key(self.external_key, tenant),
            }
        )

    @property
    def part_key(self) -> str:
        """What identifies this episode, or this part of it, within a chunk: its id, the
        messages it holds and a digest of their text (pieces of one long message share their
        message indexes)."""
        digest = hashlib.sha1("\n".join(m.text for m in self.messages).encode()).hexdigest()
        return f"{self.id}:{self.messages_from}:{self.messages_to}:{digest[:16]}"

    @property
    def text_length(self) -> int:
        """Characters of message text, the measure the extraction gate uses."""
        return sum(len(m.text) for m in self.messages)

    @property
    def gist(self) -> str:
        """What predict embeds: the summary, or the messages when there is none."""
        if self.summary:
            return self.summary
        return " ".join(f"{m.speaker}: {m.text}" for m in self.messages)


class EpisodicHit(BaseModel):
    """One episode a search found: when it was said, how it ranked and its text."""

    id: UUID
    conversation_id: str
    start_at: datetime
    end_at: datetime
    pending: bool = Field(description="Not consolidated yet: no fact may cite it so far.")
    superseded: bool = Field(
        default=False,
        description="A later episode replaced one of the facts it taught (a later version "
        "of it had begun by the search's time): part of what it says no longer holds. Asked "
        "about now (`now`, `currently`, `still` ...), the episode that replaced it comes first "
        "where both are found.",
    )
    messages: int = Field(description="How many messages the episode holds.")
    text: str = Field(description="Its messages, one a line: `speaker: text`.")
    excerpt: bool = Field(description="The text is cut to the budget around the best messages.")
    score: float = Field(
        description="How well it answers, from 0 to 1 (the best one 1): its fused rank score "
        "weighed by its retrievability, over the best one's."
    )
    ranks: dict[str, int | None] = Field(
        description="The episode's rank in each channel (fulltext: BM25 over the "
        "conversation's episodes; vector: by its window nearest the query; temporal: among "
        "the episodes begun within the time the query names, null when it names none)."
    )
    retrievability: float = Field(
        description="FSRS retrievability now (or as of the search's time): the probability it "
        "is recalled, from its last review."
    )
    reviews: int = Field(description="How many searches returned it before this one.")
