"""The consolidation prompt and the answer schema it asks for, kept together on purpose.

The system part is byte-identical across calls so that a serving engine's prefix cache hits;
everything that varies (existing facts, episodes) comes after it in the user part. Facts and
episodes are shown under short ids (F1, E1), never UUIDs: short ids cost fewer tokens, and the
guard can tell a hallucinated id from a real one by looking it up in what was shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from slowwave.models.category import DEFINITIONS, Category
from slowwave.models.episode import Episode, Message
from slowwave.models.fact import Fact

# Bounds the JSON schema gives a decoder; the guard enforces them per item with a reason.
MAX_FACTS_PER_ANSWER = 100
MAX_FACT_CHARS = 300
MIN_FACT_CHARS = 8
MAX_KEYWORDS = 5
MAX_KEYWORD_CHARS = 40
MAX_SLOT_CHARS = 60

# Single-valued attributes (seed 002's keys, seed 003's deterministic profile keys): a person
# has one of each at a time, so a new value in a filled slot replaces the old one. A fixed
# vocabulary, so that two answers name the same slot the same way.
SLOT_ATTRIBUTES = (
    "identity:name",
    "identity:pronouns",
    "identity:age",
    "identity:location",
    "identity:occupation",
    "identity:employer",
    "relationship:partner",
    "relationship:marital_status",
)


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

    # A grammar makes a model write properties in schema order, required ones first. The fact
    # comes first: a small model that writes the sentence before choosing an action states
    # what was said instead of an action it then has to fill. The two properties most items
    # leave empty (slot, existing_fact_id) are optional and come last, so a new fact without
    # a slot costs no ``"slot":null,"existing_fact_id":null`` (10 of its ~45 answer tokens,
    # each decoded in turn); endpoints that enforce strict structured outputs get them
    # required and nullable instead (``models.llm.strict_schema``). Parsing stays lenient
    # (defaults), so an answer that omits any of them is still read and the guard decides.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"required": ["fact", "category", "keywords", "episodes", "action"]},
    )

    fact: str = Field(
        description="One self-contained sentence that names the person it is about.",
        json_schema_extra={"minLength": MIN_FACT_CHARS, "maxLength": MAX_FACT_CHARS},
    )
    category: str = Field(
        description="Exactly one of the 8 categories.",
        json_schema_extra={"enum": [c.value for c in Category]},
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
    action: FactAction = Field(
        description="new: knowledge no existing fact covers. reinforce: an existing fact "
        "says the same; give its id. update: an existing fact changed (moved, renamed, "
        "corrected); give its id and the new sentence. invalidate: an existing fact is no "
        "longer true and nothing replaces it; give its id."
    )
    slot: str | None = Field(
        default=None,
        description="For a fact a person has only one of at a time: the attribute, a colon "
        "and the person's speaker name as the transcript shows it (identity:location:ana); "
        "null for anything else.",
        json_schema_extra={"maxLength": MAX_SLOT_CHARS},
    )
    existing_fact_id: ShortId | None = Field(
        default=None,
        description="For reinforce, update and invalidate: the id of the fact acted on: an "
        "existing fact as shown (F1, F2, ...), or a fact written earlier in this answer "
        "(N1 = the fact written by the answer's first item, N2 by its second, ...). Null for new.",
    )


def normalize_slot(slot: str | None, speakers: Iterable[str] | None = None) -> str | None:
    """The slot key an answer means (``identity:location`` or ``identity:location:ana``),
    lower-cased and without spaces; None for no slot or an attribute outside the vocabulary
    (the fact is kept, only without a slot).

    With the chunk's ``speakers``, a person part must name one of them, by full name or by a
    first name only one of them has, and is written as that speaker's full name; ``i`` (or
    ``me``, ``user``) stands for the only speaker who is not an agent's role, when there is
    one. Any other person (a pet, someone only mentioned, ``i`` between two people) drops the
    slot: a wrong person would end another's fact, a missing slot only leaves the model's
    action as it was."""
    if not slot:
        return None
    parts = [_slot_part(p) for p in slot.split(":")]
    parts = [p for p in parts if p]
    attribute = ":".join(parts[:2])
    if attribute not in SLOT_ATTRIBUTES or len(parts) > 3:
        return None
    if len(parts) == 3 and speakers is not None:
        person = _speaker_named(parts[2], speakers)
        if person is None:
            return None
        parts[2] = person
    return ":".join(parts)


# How a model names the person speaking when it does not use their name, and the speaker
# roles of an agent rather than a person.
_FIRST_PERSON = frozenset({"i", "me", "my", "myself", "user", "the_user", "speaker"})
# (the SQL function slowwave_person_texts, migration 0036, leaves the same roles' words out)
AGENT_ROLES = frozenset({"assistant", "agent", "ai", "bot", "system", "tool"})


def said_by_agent(message: Message) -> bool:
    """Whether an agent's role (``AGENT_ROLES``), not a person, said ``message``."""
    return is_agent_role(message.speaker)


def is_agent_role(speaker: str) -> bool:
    """Whether ``speaker`` names an agent's role (``AGENT_ROLES``, any case and spacing)."""
    return speaker.strip().lower() in AGENT_ROLES


def _slot_part(text: str) -> str:
    return "_".join(text.lower().split())


def _speaker_named(person: str, speakers: Iterable[str]) -> str | None:
    """The speaker (as a slot part) that ``person`` names: the full name, else the only one
    whose first name it is."""
    names = {_slot_part(s) for s in speakers} - {""}
    if person in names:
        return person
    if person in _FIRST_PERSON:
        candidates = [n for n in names if n not in AGENT_ROLES]
    else:
        candidates = [n for n in names if n.split("_")[0] == person]
    return candidates[0] if len(candidates) == 1 else None


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


def category_lines() -> str:
    """The categories and their definitions, a line each, as prompts show them."""
    return "\n".join(f"- {c.value}: {DEFINITIONS[c]}" for c in Category)


# The answer shown in the prompt: the schema itself is never shown (a grammar enforces it), so
# a small model learns the shape from this. Its facts are about no one in any transcript, and
# the guard refuses a fact copied from it, its name swapped or not (``copied_from_example``).
EXAMPLE_FACTS: tuple[tuple[str, str, list[str], str | None], ...] = (
    (
        "Priya keeps three tortoises named after planets.",
        "preference",
        ["Priya", "tortoises"],
        None,
    ),
    ("Priya's brother Rafael is learning to sail.", "relationship", ["Priya", "Rafael"], None),
    ("Priya moved to Porto in March.", "identity", ["Priya", "Porto"], "identity:location:priya"),
    ("Priya wants to walk the Camino de Santiago in 2026.", "goal", ["Priya", "Camino"], None),
)
EXAMPLE_ANSWER = json.dumps(
    {
        "facts": [
            {
                "fact": fact,
                "category": category,
                "keywords": keywords,
                "episodes": [f"E{i // 2 + 1}"],
                "action": "new",
                **({"slot": slot} if slot else {}),
            }
            for i, (fact, category, keywords, slot) in enumerate(EXAMPLE_FACTS)
        ]
    },
    ensure_ascii=False,
    # compact, as the grammar lets a model write it: a model copies the example's spacing,
    # and each ", " or ": " it copies is a token decoded in turn (and 46 in the prompt)
    separators=(",", ":"),
)


_KEYWORD = re.compile(r"[A-Za-z][A-Za-z'\-]+")
_NOT_KEYWORDS = {"The", "A", "An", "She", "He", "They", "Her", "His", "Their", "It", "This", "That"}


def keywords_of(sentence: str, speaker: str) -> list[str]:
    """Keywords for a sentence a model gave none for: the speaker and the capitalised words of
    the sentence, then its longest words."""
    found: list[str] = [speaker]
    words = _KEYWORD.findall(sentence)
    for word in words:
        if word[0].isupper() and word not in _NOT_KEYWORDS and word not in found:
            found.append(word)
    for word in sorted(words, key=len, reverse=True):
        if len(found) >= 3:
            break
        if word.lower() not in {w.lower() for w in found} and len(word) > 4:
            found.append(word.lower())
    return [w[:MAX_KEYWORD_CHARS] for w in found[:MAX_KEYWORDS]]


def copied_from_example(fact: str) -> bool:
    """The fact is one of the example's, with its first word (the name) swapped or not."""
    tail = _after_name(fact)
    return any(tail == _after_name(example) for example, *_ in EXAMPLE_FACTS)


def _after_name(fact: str) -> str:
    words = fact.lower().rstrip(". ").split()
    return " ".join(words[1:])


SYSTEM_PROMPT = f"""You turn conversation transcripts into long-term memory: facts about the \
people in them.
You are shown the facts already known (F1, F2, ...), then new episodes (E1, E2, ...), oldest
first. List every fact the episodes state about a person: what happened to them, what they
did, have, like, feel and plan, who their family and friends are, their work and home.

Each fact:
- is one sentence in the third person that starts with the person's name: the speaker's, or
  the name a speaker gives for themselves ("I'm Ana" → "Ana ..."); "The user" only while no
  name is known;
- says one thing: "Ana sails and paints" is two facts;
- is stated in the episodes: never add ages, jobs, places or dates they do not give;
- is about the person, not the conversation: "Ana asked ..." or "they talked about ..." are
  not facts; nor are greetings, thanks and passing small talk.

Categories (exactly one per fact):
{category_lines()}

Actions:
- new: no known fact says it; no existing_fact_id.
- reinforce: a known fact already says it; give its id, do not restate it as new.
- update: a known fact changed (a move, a new job, a corrected name); give its id and the new,
  complete sentence.
- invalidate: a known fact is no longer true and nothing replaces it; give its id.
Several values can hold at once (liking jazz and liking rock): update only what is replaced.
A change within these episodes keeps its history: write the earlier state as new, then update
it by its answer id (N1 is the fact your first item writes, N2 your second, ...).
Use only the ids shown (F1, F2, ...) or N-ids of your earlier items; never invent ids.
Cite the episodes (E1, E2, ...) that state each fact. Keywords: 1 to 5 names and nouns.
Slot: only for what a person has one of at a time, {", ".join(SLOT_ATTRIBUTES)}: the
attribute, a colon and their speaker name (identity:location:ana); otherwise no slot.

Answer with JSON only, shaped like this example about someone else:
{EXAMPLE_ANSWER}
"""

# the attention line of a surprising episode: no score in it, which a small model copied into
# a fact about the person ("The user believes that the surprise score of 1.00/1.0 is ...")
DEEP_EXTRACTION = (
    "Episode {episode_id} is unlike what is known (a note, not part of the conversation). "
    "Extract facts more thoroughly: pay attention to novel or unexpected information and to "
    "known facts it changes."
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


# How much of an agent's message the prompt shows. Facts are about the people: an assistant's
# long answers (advice, lists, recipes) are most of a chat's tokens and teach nothing about the
# user, and a small model reads them as the user's; their opening, which often repeats what the
# user said ("Congratulations on your new personal best of 25:50!"), is kept.
AGENT_MESSAGE_CHARS = 280


_QUOTE_PAIR = re.compile(r'"([^"\n]*)"')


def curly_quotes(text: str) -> str:
    """``text`` with its straight double quotes as typographic ones. A model answering in
    JSON copies a quoted title as it reads it, and its straight quote ends the string: "The
    user is now on page 220 of" was all that was left of a fact about a novel. A typographic
    quote is only a character to it."""
    return _QUOTE_PAIR.sub(r"“\1”", text).replace('"', "”")


def render_message_line(message: Message) -> str:
    """One message as the prompt shows it: an agent's cut to ``AGENT_MESSAGE_CHARS``, its
    quotes typographic (``curly_quotes``)."""
    text = curly_quotes(message.text)
    if len(text) > AGENT_MESSAGE_CHARS and said_by_agent(message):
        text = text[:AGENT_MESSAGE_CHARS].rstrip() + " […]"
    return f"{message.speaker}: {text}"


MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def episode_time(episode: Episode) -> str:
    """When the episode happened, in UTC, as a person writes it (``8 May 2023, 13:56 to
    14:30 UTC``): the model dates facts from it, and a short form costs fewer tokens than ISO
    timestamps. UTC and English month names whatever the database's zone and the locale, so
    that one episode is always shown the same."""
    start, end = episode.start_at.astimezone(UTC), episode.end_at.astimezone(UTC)
    shown = f"{_day(start)}, {start:%H:%M}"
    if end.date() != start.date():
        return f"{shown} to {_day(end)}, {end:%H:%M} UTC"
    if (end.hour, end.minute) != (start.hour, start.minute):
        return f"{shown} to {end:%H:%M} UTC"
    return f"{shown} UTC"


def _day(moment: datetime) -> str:
    return f"{moment.day} {MONTHS[moment.month - 1]} {moment.year}"


def render_episode_lines(index: int, episode: Episode) -> list[str]:
    """The lines of one episode shown as E{index + 1} (chunking counts its tokens by them)."""
    lines = [f"### {episode_short_id(index)} | {episode_time(episode)}"]
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
        lines.append("(none yet: every fact is new)")
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
