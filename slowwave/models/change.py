"""The change-check prompt and the answer schema it asks for, kept together.

The model often proposes a new fact as an ``update`` without naming the fact it updates ("Dana
is moving to Manchester ..." beside "Dana is teaching chemistry at a high school in Leeds."):
the guard can only write it as new, and the old fact stays active beside the one that
contradicts it. Each such fact and its nearest known fact about the same person are shown as
a pair; the model says, for each, whether the known fact still holds once the later one does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from slowwave.models.merge import exactly_these_pairs

MAX_PAIRS_PER_REQUEST = 20


class ChangeVerdict(BaseModel):
    """Whether one pair's known fact still holds once the later one does."""

    model_config = ConfigDict(extra="forbid")

    pair: str = Field(description="The pair's id as shown (P1, P2, ...).")
    still_true: bool = Field(
        description="False only when the later sentence gives a new value for what the known "
        "one says (another city, job, employer, number, partner): the known one is then out of "
        "date. True when both can hold at once."
    )


class ChangeJudgement(BaseModel):
    """The model's whole answer for one chunk's pairs."""

    model_config = ConfigDict(extra="forbid")

    pairs: list[ChangeVerdict] = Field(
        description="One verdict per pair shown, in order.",
        json_schema_extra={"maxItems": MAX_PAIRS_PER_REQUEST},
    )

    @classmethod
    def response_schema(cls, pairs: int) -> dict[str, Any]:
        """Exactly ``pairs`` verdicts, each naming one of the pairs shown."""
        return exactly_these_pairs(cls, "ChangeVerdict", pairs)


EXAMPLE = json.dumps(
    {"pairs": [{"pair": "P1", "still_true": False}, {"pair": "P2", "still_true": True}]}
)

CHANGE_SYSTEM_PROMPT = f"""You keep a memory of facts about people up to date.
Each pair (P1, P2, ...) shows a known fact and a later fact about the same person. Decide for
each pair whether the known fact is still true once the later one is.
- still_true false: the later fact gives a new value for the same thing (moved to another
  city, a new job or employer, another number, a new partner): the known fact is out of date.
- still_true true: the later fact says something else, or adds to it; both can hold at once.
Answer with JSON only, one verdict per pair in order, like this example:
{EXAMPLE}"""


def render_change_prompt(pairs: Sequence[tuple[str, str]]) -> str:
    """The pairs of one chunk: (known sentence, later sentence), shown as P1, P2, ..."""
    lines = []
    for i, (known, later) in enumerate(pairs):
        lines += [f"P{i + 1}", f"Known: {known}", f"Later: {later}", ""]
    lines.append("Answer with one verdict per pair, as JSON.")
    return "\n".join(lines)
