"""The second-look prompt and the answer schema it asks for, kept together.

A small model shown a chunk and the facts already known often lists the known facts again and
passes over what is new: asked about Dana's fourth session, the default model restated "Dana
started teaching chemistry at a high school in Leeds." and wrote nothing of "Big news: I'm
moving to Manchester in July for a new job at a sixth-form college." A person's message that
no item of the answer covers is shown again here, alone with who said it, without the
episodes around it, the message it answers or the facts known: one short request (several
chunks' where each leaves few uncovered, ``tasks.second_look.shared_looks``), each fact naming
the message (M1, M2, ...) it comes from.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from slowwave.models.category import Category
from slowwave.models.consolidation import (
    MAX_FACT_CHARS,
    MIN_FACT_CHARS,
    category_lines,
    curly_quotes,
)

# what one request shows of a message
MESSAGE_CHARS = 600
MAX_FACTS_PER_MESSAGE = 4
# where a message shown is cut short: a fact that copies it is refused (the guard)
CUT_MARK = "[…]"


class MessageFact(BaseModel):
    """One fact a message states, and the message it is from."""

    model_config = ConfigDict(extra="forbid")

    message: str = Field(description="The message's id as shown (M1, M2, ...).")
    fact: str = Field(
        description="One sentence in the third person that starts with the person's name.",
        json_schema_extra={"minLength": MIN_FACT_CHARS, "maxLength": MAX_FACT_CHARS},
    )
    category: str = Field(
        description="Exactly one of the 8 categories.",
        json_schema_extra={"enum": [c.value for c in Category]},
    )


class SecondLookAnswer(BaseModel):
    """The model's whole answer for one chunk's messages."""

    model_config = ConfigDict(extra="forbid")

    facts: list[MessageFact] = Field(description="Every lasting fact the messages state.")

    @classmethod
    def response_schema(cls, messages: int) -> dict[str, Any]:
        """At most ``MAX_FACTS_PER_MESSAGE`` facts a message, each naming a message shown."""
        schema = cls.model_json_schema()
        schema["properties"]["facts"]["maxItems"] = MAX_FACTS_PER_MESSAGE * messages
        item = schema["$defs"]["MessageFact"]
        item["properties"]["message"]["enum"] = [message_short_id(i) for i in range(messages)]
        return schema


@dataclass(frozen=True)
class ShownMessage:
    """A message as the second look shows it: who said it (by the name facts use) and what it
    says. Not when: shown the day, the default model wrote "Kenji is 13 years old." from "13
    February 2024"; a fact is dated by its episode anyway. Nor the message it answers: shown
    another speaker's message above it, the small model wrote that message's news under the
    person's label ("Melanie went to an LGBTQ+ pride parade.", Caroline's), or copied it whole
    under the label of the message that answered it; alone, each message's facts are its
    speaker's (the benchmarks page, *What a night costs*)."""

    person: str
    text: str


def message_short_id(index: int) -> str:
    return f"M{index + 1}"


# the example's facts are the consolidation prompt's (``EXAMPLE_FACTS``), so that the guard
# refuses one copied from here too (``copied_from_example``)
EXAMPLE = json.dumps(
    {
        "facts": [
            {"message": "M1", "fact": "Priya moved to Porto in March.", "category": "identity"},
            {
                "message": "M1",
                "fact": "Priya keeps three tortoises named after planets.",
                "category": "preference",
            },
        ]
    },
    separators=(",", ":"),
)

SECOND_LOOK_SYSTEM_PROMPT = f"""You write down what people say about themselves, as facts for \
a long-term memory.
Each message (M1, M2, ...) is shown with who said it. List the lasting facts it
states about its speaker and the people they name: where they live and work, what they have
and how many, what they do, like and plan, who their family and friends are, and what has
changed for them.
Each fact is one sentence in the third person that starts with the person's name as shown,
says one thing, and adds nothing the message does not say. Greetings, thanks, questions and
passing small talk give no fact; a message may give none.
Categories (exactly one per fact):
{category_lines()}
Answer with JSON only, like this example about someone else:
M1 | Priya
We finally moved to Porto in March! My three tortoises came too, all named after planets.
Answer: {EXAMPLE}"""


def render_second_look_prompt(messages: Sequence[ShownMessage]) -> str:
    """The messages of one chunk, shown as M1, M2, ..., oldest first."""
    lines = []
    for i, shown in enumerate(messages):
        lines += [f"{message_short_id(i)} | {shown.person}", _cut(shown.text, MESSAGE_CHARS), ""]
    lines.append("Answer with the facts these messages state, as JSON.")
    return "\n".join(lines)


def longest_prompt(messages: int) -> int:
    """The most characters a request of ``messages`` messages can show: each at its cut,
    said by a person of a long name."""
    longest = ShownMessage("P" * 40, "m" * (MESSAGE_CHARS + 1))
    return len(render_second_look_prompt([longest] * messages))


def _cut(text: str, limit: int) -> str:
    text = " ".join(curly_quotes(text).split())
    return text if len(text) <= limit else text[:limit].rstrip() + f" {CUT_MARK}"
