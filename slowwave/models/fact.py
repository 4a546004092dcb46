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


_NUMBER_WORDS = {
    word: str(value)
    for value, words in enumerate(
        [
            ("zero", "none"),
            ("one", "once", "first"),
            ("two", "twice"),
            ("three", "thrice", "third"),
            ("four", "fourth"),
            ("five", "fifth"),
            ("six", "sixth"),
            ("seven", "seventh"),
            ("eight", "eighth"),
            ("nine", "ninth"),
            ("ten", "tenth"),
            ("eleven",),
            ("twelve",),
            ("thirteen",),
            ("fourteen",),
            ("fifteen",),
            ("sixteen",),
            ("seventeen",),
            ("eighteen",),
            ("nineteen",),
            ("twenty",),
        ]
    )
    for word in words
}
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*|[A-Za-z]+")


def numbers_in(fact: str) -> frozenset[str]:
    """The numbers a fact states, in digits ("three sessions" and "3 sessions" alike, "1,200"
    as 1200, times as written: "25:50")."""
    found = set()
    for token in _NUMBER.findall(fact):
        if token[0].isdigit():
            found.add(token.replace(",", ""))
        elif (word := token.lower()) in _NUMBER_WORDS:
            found.add(_NUMBER_WORDS[word])
    return frozenset(found)


def other_numbers(fact: str, known: str) -> bool:
    """Whether two sentences, alike as they may read, state different numbers: "The user
    attended five sessions ..." is no duplicate of "... three sessions ...", whatever their
    vectors say (MiniLM puts them above the dedupe threshold)."""
    mine, theirs = numbers_in(fact), numbers_in(known)
    return bool(mine) and bool(theirs) and mine != theirs


def embedding_text(category: str, fact: str, keywords: list[str]) -> str:
    """What a fact's vector encodes: ``"{category}: {fact} {keywords}"`` (seed 001)."""
    return f"{category}: {fact} {' '.join(keywords)}".rstrip()
