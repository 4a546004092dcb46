"""The summary of one consolidation run: stored in ``consolidation_runs`` and shown in the UI."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import BaseModel, Field


class ChunkFailure(BaseModel):
    conversation_id: str
    chunk_id: UUID
    episodes: int
    quarantined: bool
    reason: str


class RunSummary(BaseModel):
    """Counts, tokens and stage timings of a run."""

    run_id: UUID
    kind: str = "manual"
    status: str = "running"
    started_at: datetime
    finished_at: datetime | None = None
    conversations: int = 0
    chunks: int = 0
    chunks_failed: int = 0
    model_calls: int = 0
    episodes_consolidated: int = 0
    episodes_skipped: int = Field(default=0, description="Consolidated by the gate, no model.")
    episodes_quarantined: int = 0
    episodes_deferred: int = Field(
        default=0, description="Left for a later run behind a failed chunk of their conversation."
    )
    facts_inserted: int = 0
    facts_reinforced: int = 0
    facts_updated: int = 0
    facts_invalidated: int = 0
    dedupe_merges: int = 0
    actions_rejected: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    failures: list[ChunkFailure] = Field(default_factory=list)

    def add_time(self, stage: str, seconds: float) -> None:
        self.stage_seconds[stage] = round(self.stage_seconds.get(stage, 0.0) + seconds, 4)
