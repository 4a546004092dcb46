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


class ConversationProfile(BaseModel):
    """The model's profile of one conversation."""

    model_config = ConfigDict(extra="forbid")

    profile: str = Field(
        description="A profile of each person in the facts: who they are, where they live and "
        "work, family and friends, what they like and plan, how they want to be treated. "
        "Only what the facts say; the most important first; plain sentences.",
        json_schema_extra={"minLength": 1},
    )

    # No maxLength: llama.cpp's server expands one into a grammar rule per character and drops
    # the connection at a profile's length (1,500 characters). The prompt's word limit asks for
    # the length, ``llm_max_tokens`` bounds the answer, and ``tasks.profile.within`` cuts it.
    @classmethod
    def response_schema(cls) -> dict[str, Any]:
        return cls.model_json_schema()


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
