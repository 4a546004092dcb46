"""The conversation-profile prompt and the answer schema it asks for, kept together.

Seed 002's ``summarize(scope, token_limit)`` and seed 001's context pre-retrieve: a short
profile of what is known about the people of a conversation, written by the model from the
conversation's active facts and stored, so that an agent can put it in a system prompt before
it knows what the user will ask.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MAX_PROFILE_CHARS = 8000


class ConversationProfile(BaseModel):
    """The model's profile of one conversation."""

    model_config = ConfigDict(extra="forbid")

    profile: str = Field(
        description="A profile of each person in the facts: who they are, where they live and "
        "work, family and friends, what they like and plan, how they want to be treated. "
        "Only what the facts say; the most important first; plain sentences.",
        json_schema_extra={"minLength": 1, "maxLength": MAX_PROFILE_CHARS},
    )

    @classmethod
    def response_schema(cls, max_chars: int = MAX_PROFILE_CHARS) -> dict[str, Any]:
        """The schema with the profile bounded to ``max_chars``: a decoder stops there."""
        schema = cls.model_json_schema()
        schema["properties"]["profile"]["maxLength"] = min(max_chars, MAX_PROFILE_CHARS)
        return schema


PROFILE_SYSTEM_PROMPT = """You write the profile a conversational agent reads before it talks
to someone again. You are given the facts known about the people of one conversation, the best
corroborated first, each with its category. Write a profile of each person: who they are, where
they live and work, family and friends, what they like, do and plan, and any guideline on how
to treat them. Say only what the facts say, most important first, in plain sentences, and stay
within the word limit given. Answer with JSON only: {"profile": "..."}."""


def render_profile_prompt(facts: Sequence[tuple[str, str]], max_words: int) -> str:
    """The varying part: (category, fact) lines, then the limit."""
    lines = ["## Facts"]
    lines += [f"- [{category}] {fact}" for category, fact in facts]
    lines += ["", f"Write the profile in at most {max_words} words, as JSON."]
    return "\n".join(lines)
