"""The episode-summary prompt and the answer schema it asks for, kept together.

Transcripts rarely come with summaries; predict embeds an episode's summary to find related
facts, and the consolidation prompt shows it. When the source has none, the model runtime
writes one at ingest, in batches, through the same structured-output call as consolidation.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from slowwave.models.episode import Episode

MAX_SUMMARY_CHARS = 600


class EpisodeSummary(BaseModel):
    """The model's summary of one episode."""

    model_config = ConfigDict(extra="forbid")

    summary: str = Field(
        description="Two or three sentences: who talked, what happened, what was learnt about "
        "the people. Names, places, dates as said; no speculation.",
        json_schema_extra={"minLength": 20, "maxLength": MAX_SUMMARY_CHARS},
    )

    @classmethod
    def response_schema(cls) -> dict[str, Any]:
        return cls.model_json_schema()


SUMMARY_SYSTEM_PROMPT = """You summarise one episode of a conversation for a memory system.
Write two or three plain sentences: who talked, what happened, and what was learnt about the
people (names, places, plans, preferences). Keep names and dates as they were said. Do not
speculate. Answer with JSON only, matching the schema."""


def render_summary_prompt(episode: Episode) -> str:
    lines = [f"Episode from {episode.start_at.isoformat()} to {episode.end_at.isoformat()}:"]
    lines += [f"{m.speaker}: {m.text}" for m in episode.messages]
    return "\n".join(lines)
