"""The consolidation prompt and the answer schema it asks for, kept together on purpose.

The system part is byte-identical across calls so that a serving engine's prefix cache hits;
everything that varies (existing facts, episodes) comes after it in the user part. Facts and
episodes are shown under short ids (F1, E1), never UUIDs: short ids cost fewer tokens, and the
guard can tell a hallucinated id from a real one by looking it up in what was shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from models.category import DEFINITIONS, Category
from models.episode import Episode, Message
from models.fact import Fact

# Bounds the JSON schema gives a decoder; the guard enforces them per item with a reason.
MAX_FACTS_PER_ANSWER = 100
MAX_FACT_CHARS = 300
MIN_FACT_CHARS = 8
MAX_KEYWORDS = 5
MAX_KEYWORD_CHARS = 40


class FactAction(StrEnum):
    new = "new"
    reinforce = "reinforce"
    update = "update"
    invalidate = "invalidate"


# A short id (F1, E2, N3): bounded in the schema for the decoder, but parsed leniently; the
# guard decides what an id that names nothing means.
ShortId = Annotated[str, WithJsonSchema({"type": "string", "maxLength": 8})]


class ConsolidatedFact(BaseModel):
    """One thing the episodes teach, and what to do with it."""

    # The schema requires every property (the optional ones nullable), as endpoints that
    # enforce strict structured outputs demand (``models.llm.strict_schema``); parsing stays
    # lenient (defaults), so an answer that omits one is still read and the guard decides.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "required": ["action", "existing_fact_id", "category", "fact", "keywords", "episodes"]
        },
    )

    action: FactAction = Field(
        description="new: knowledge no existing fact covers. reinforce: an existing fact "
        "says the same; give its id. update: an existing fact changed (moved, renamed, "
        "corrected); give its id and the new sentence. invalidate: an existing fact is no "
        "longer true and nothing replaces it; give its id."
    )
    existing_fact_id: ShortId | None = Field(
        default=None,
        description="For reinforce, update and invalidate: the id of the fact acted on: an "
        "existing fact as shown (F1, F2, ...), or a fact written earlier in this answer "
        "(N1 = the fact written by the answer's first item, N2 by its second, ...). Null for new.",
    )
    category: str = Field(
        description="Exactly one of the 8 categories.",
        json_schema_extra={"enum": [c.value for c in Category]},
    )
    fact: str = Field(
        description="One self-contained sentence that names the person it is about.",
        json_schema_extra={"minLength": MIN_FACT_CHARS, "maxLength": MAX_FACT_CHARS},
    )
    keywords: list[str] = Field(
        description="1 to 5 key entity names or nouns of the fact, for keyword search.",
        json_schema_extra={
            "minItems": 1,
            "maxItems": MAX_KEYWORDS,
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_KEYWORD_CHARS},
        },
    )
    episodes: list[ShortId] = Field(
        default_factory=list,
        description="Ids of the episodes (E1, E2, ...) that evidence this item: at least one; "
        "its time is the end of the latest of them.",
        json_schema_extra={"minItems": 1},
    )


class ConsolidationOutput(BaseModel):
    """The model's whole answer for one chunk of episodes."""

    model_config = ConfigDict(extra="forbid")

    facts: list[ConsolidatedFact] = Field(
        description="Every durable fact the episodes teach, with its action.",
        json_schema_extra={"maxItems": MAX_FACTS_PER_ANSWER},
    )

    @classmethod
    def response_schema(cls) -> dict[str, Any]:
        """The JSON schema that drives structured decoding."""
        return cls.model_json_schema()


def _category_lines() -> str:
    return "\n".join(f"- {c.value}: {DEFINITIONS[c]}" for c in Category)


SYSTEM_PROMPT = f"""You consolidate a conversational agent's episodic memory into semantic memory.
You are shown facts already known about this conversation, then new episodes, oldest first.
Decide what the episodes teach that is worth remembering for the long term, and how it relates
to what is already known.

Categories (use exactly one per fact):
{_category_lines()}

Actions:
- new: the episodes teach something no existing fact covers.
- reinforce: an existing fact says the same thing; give its id. Do not restate it as new.
- update: an existing fact has changed (a move, a new job, a corrected name); give its id and
  write the new, complete sentence.
- invalidate: an existing fact is no longer true and nothing replaces it; give its id.
A change that happens within these episodes keeps its history: write the earlier state as new,
then update or invalidate it by its answer id (N1 is the fact your first item writes, N2 your
second, ...), citing the episode where it changed.

Rules:
1. Only lasting knowledge. Transient states ("I'm hungry now") are not facts.
2. One self-contained sentence per fact that names who it is about; no pronouns without a
   referent, no bare names or single words.
3. Several values can hold at once (liking Rust and liking TypeScript): use update or
   invalidate only when the new information replaces the old.
4. Refer to existing facts only by the ids shown (F1, F2, ...), to your own facts only by
   N-ids of earlier items; never invent ids.
5. Cite the episodes (E1, E2, ...) that evidence each item, at least one: the fact's time is
   the end of the latest episode cited.
6. 1 to 5 keywords per fact: the names and nouns someone would search for.
7. Answer with JSON only, matching the schema.
"""

DEEP_EXTRACTION = (
    "Episode {episode_id} had a surprise score of {surprise:.2f}/1.0. Extract facts more "
    "thoroughly: pay attention to novel or unexpected information and to beliefs it challenges."
)


def fact_short_id(index: int) -> str:
    return f"F{index + 1}"


def episode_short_id(index: int) -> str:
    return f"E{index + 1}"


def render_fact_line(index: int, fact: Fact) -> str:
    return f"[{fact_short_id(index)}] [{fact.category.value}] {fact.fact}"


def shown_surprise(episode: Episode) -> float:
    """The surprise the prompt shows. Opening a chunk computes every missing one first; an
    episode not scored yet (chunking costs it before that) counts as the most surprising, so
    its prompt can only be smaller than costed."""
    return 1.0 if episode.surprise is None else episode.surprise


def render_message_line(message: Message) -> str:
    """One message as the prompt shows it."""
    return f"{message.speaker}: {message.text}"


def render_episode_lines(index: int, episode: Episode) -> list[str]:
    """The lines of one episode shown as E{index + 1} (chunking counts its tokens by them)."""
    lines = [
        f"### {episode_short_id(index)} | {episode.start_at.isoformat()} to "
        f"{episode.end_at.isoformat()} | surprise {shown_surprise(episode):.2f}"
    ]
    if episode.summary:
        lines.append(f"Summary: {episode.summary}")
    lines += [render_message_line(m) for m in episode.messages]
    lines.append("")
    return lines


def render_user_prompt(
    facts: Sequence[Fact], episodes: Sequence[Episode], flashbulb_surprise: float
) -> str:
    """The varying part: existing facts under F-ids, then the episodes under E-ids."""
    lines = ["## Existing facts"]
    if facts:
        lines += [render_fact_line(i, f) for i, f in enumerate(facts)]
    else:
        lines.append("(none yet)")
    lines += ["", "## Episodes, oldest first"]
    for i, episode in enumerate(episodes):
        lines += render_episode_lines(i, episode)
    deep = [
        DEEP_EXTRACTION.format(episode_id=episode_short_id(i), surprise=shown_surprise(e))
        for i, e in enumerate(episodes)
        if shown_surprise(e) >= flashbulb_surprise
    ]
    if deep:
        lines += ["## Attention", *deep, ""]
    lines.append("Answer with the facts these episodes teach, as JSON.")
    return "\n".join(lines)
