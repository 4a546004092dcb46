"""The gray-zone merge prompt and the answer schema it asks for, kept together (seed 004).

A fact a chunk writes whose nearest active fact is close but not a duplicate (cosine between
``SLOWWAVE_GRAY_ZONE_LOWER`` and the dedupe threshold) may still say the same thing in other
words. The model judges every such pair of a chunk in one request: same or not, and when the
same, one sentence that says what both say. The faithfulness gate then keeps the merged
sentence only if it stays close to both.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from slowwave.models.consolidation import MAX_FACT_CHARS, MIN_FACT_CHARS

MAX_PAIRS_PER_REQUEST = 50


class PairJudgement(BaseModel):
    """Whether one pair states the same fact, and the sentence that merges it."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"required": ["pair", "same", "merged"]}
    )

    pair: str = Field(description="The pair's id as shown (P1, P2, ...).")
    same: bool = Field(
        description="True only when both sentences state the same fact about the same person; "
        "a different value (another city, another name, another time) is not the same."
    )
    # the bounds sit on the string branch, where a grammar applies them; parsing is lenient
    merged: Annotated[
        str | None,
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "string", "minLength": MIN_FACT_CHARS, "maxLength": MAX_FACT_CHARS},
                    {"type": "null"},
                ]
            }
        ),
    ] = Field(
        default=None,
        description="When the same: one sentence that says everything both say and nothing "
        "more. Null otherwise.",
    )


class MergeJudgement(BaseModel):
    """The model's whole answer for one chunk's gray-zone pairs."""

    model_config = ConfigDict(extra="forbid")

    pairs: list[PairJudgement] = Field(
        description="One judgement per pair shown, in order.",
        json_schema_extra={"maxItems": MAX_PAIRS_PER_REQUEST},
    )

    @classmethod
    def response_schema(cls, pairs: int = MAX_PAIRS_PER_REQUEST) -> dict[str, Any]:
        """The schema for a request showing ``pairs`` pairs: exactly that many judgements,
        each naming one of them, so a decoder cannot run on inventing more."""
        return exactly_these_pairs(cls, "PairJudgement", pairs)


def exactly_these_pairs(answer: type[BaseModel], item: str, pairs: int) -> dict[str, Any]:
    """``answer``'s schema for a request showing ``pairs`` pairs (P1, P2, ...): its ``pairs``
    list holds exactly that many ``item``s, each naming one of them."""
    schema = answer.model_json_schema()
    listed = schema["properties"]["pairs"]
    listed["minItems"] = listed["maxItems"] = pairs
    schema["$defs"][item]["properties"]["pair"]["enum"] = [f"P{i + 1}" for i in range(pairs)]
    return schema


EXAMPLE = json.dumps(
    {
        "pairs": [
            {
                "pair": "P1",
                "same": True,
                "merged": "Priya keeps three tortoises, named after planets.",
            },
            {"pair": "P2", "same": False, "merged": None},
        ]
    }
)

MERGE_SYSTEM_PROMPT = f"""You keep a memory of facts about people free of duplicates.
Each pair (P1, P2, ...) shows a new sentence A and a known sentence B. Decide for each pair
whether A and B state the same fact about the same person.
- same: the same thing, said in other words, or one says it in more detail.
- not the same: a different person, a different thing, or a different value of it (Lyon and
  Seoul, Bob and Alice, 2022 and 2024), even when the sentences look alike.
When the same, write merged: one sentence in the third person that says everything A and B
say and nothing more. When not, merged is null.
Answer with JSON only, one item per pair in order, like this example:
{EXAMPLE}"""


def render_merge_prompt(pairs: Sequence[tuple[str, str]]) -> str:
    """The pairs of one chunk: (new sentence, known sentence), shown as P1, P2, ..."""
    lines = []
    for i, (new, known) in enumerate(pairs):
        lines += [f"P{i + 1}", f"A: {new}", f"B: {known}", ""]
    lines.append("Answer with one judgement per pair, as JSON.")
    return "\n".join(lines)
