"""Facts: durable, categorised knowledge with provenance and bitemporal validity."""

from __future__ import annotations

import re
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, Field

from slowwave.models.category import Category


class Fact(BaseModel):
    """A row of semantic memory, as the stages read it."""

    id: UUID
    conversation_id: str
    category: Category
    fact: str
    keywords: list[str] = Field(default_factory=list)
    source_episodic_ids: list[UUID]
    valid_at: AwareDatetime = Field(description="Event time from which the fact holds.")
    invalid_at: AwareDatetime | None = Field(
        default=None, description="Event time at which it stopped holding; None = active."
    )
    supersedes_id: UUID | None = Field(default=None, description="The fact this one updated.")

    @property
    def embedding_text(self) -> str:
        return embedding_text(self.category, self.fact, self.keywords)


def said(fact: str) -> str:
    """What a fact says, for telling two facts that say the same sentence apart from their
    category and keywords: lowercased, its words joined by one space (the SQL of
    ``apply_dedupe`` makes the same of a stored fact)."""
    return re.sub(r"[\W_]+", " ", fact.lower()).strip()


def embedding_text(category: str, fact: str, keywords: list[str]) -> str:
    """What a fact's vector encodes: ``"{category}: {fact} {keywords}"`` (seed 001)."""
    return f"{category}: {fact} {' '.join(keywords)}".rstrip()
