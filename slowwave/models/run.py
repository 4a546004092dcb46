"""The summary of one consolidation run: stored in ``consolidation_runs`` and shown in the UI."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field

# A run row's counts: its columns, RunSummary's fields, what slowwave_run_counts counts from the
# run's recorded chunks, and the columns of an export's runs table, by the same names and in
# this order (the tokens last, 64-bit in an export).
RUN_COUNTS = (
    "conversations",
    "chunks",
    "chunks_failed",
    "episodes_consolidated",
    "episodes_skipped",
    "episodes_quarantined",
    "facts_inserted",
    "facts_reinforced",
    "facts_updated",
    "facts_invalidated",
    "dedupe_merges",
    "actions_rejected",
    "prompt_tokens",
    "prompt_tokens_cached",
    "completion_tokens",
)


# Upper bounds of the decision-similarity histograms (cosine similarity of a decision's fact
# to its nearest active fact); the last bucket is +Inf.
SIMILARITY_BOUNDS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0)


class SimilarityHistogram(BaseModel):
    """A run's similarities for one decision action, cumulative over ``SIMILARITY_BOUNDS``."""

    buckets: list[int] = Field(description="Decisions at or below each bound, in order.")
    total: float = Field(description="Sum of the similarities.")
    count: int


def left_undone(stored: Mapping[str, Any]) -> dict[str, int]:
    """From a run's stored summary (or its dump), the episodes it left undone by reason
    (``LEFT_UNDONE``; only reasons that count)."""
    counts = {reason: int(stored.get(field) or 0) for reason, field, _ in LEFT_UNDONE}
    return {reason: n for reason, n in counts.items() if n}


def undone_note(left: Mapping[str, int]) -> str:
    """One sentence on what a run left undone and why, from ``RunSummary.left_undone``."""
    if not left:
        return "nothing left undone"
    meaning = {reason: text for reason, _, text in LEFT_UNDONE}
    parts = [
        f"{n} episode{'s' if n != 1 else ''} {meaning.get(reason, reason)}"
        for reason, n in left.items()
    ]
    return "left undone: " + "; ".join(parts)


@dataclass(frozen=True)
class RunRequest:
    """A run a key asked for: its id, known before it starts, and the key's tenant."""

    run_id: UUID
    tenant: str


class ChunkFailure(BaseModel):
    conversation_id: str
    chunk_id: UUID
    episodes: int
    quarantined: bool
    reason: str


# Counted once for the whole run (what it closed as it started, what it left pending after its
# shards), never per shard.
_RUN_LEVEL = frozenset(
    {
        "episodes_closed",
        "episodes_open",
        "episodes_not_due",
        "episodes_held_elsewhere",
        "episodes_over_cap",
        "episodes_left_quarantined",
    }
)

# Why a run left episodes undone: the reason's name (in GET /v1/runs/ID's ``left_undone``), the
# summary's count, and what it means, as `slowwave runs show` and the run's note say it.
LEFT_UNDONE: tuple[tuple[str, str, str], ...] = (
    (
        "open",
        "episodes_open",
        "still open: the conversation's last message is younger than the segmentation gap "
        "(SLOWWAVE_SEGMENT_GAP_S) and no request closed it",
    ),
    ("held", "episodes_held_elsewhere", "held by another run"),
    ("not_due", "episodes_not_due", "not due yet under the nightly rule"),
    ("over_cap", "episodes_over_cap", "over the run's cap (SLOWWAVE_CLAIM_MAX_CONVERSATIONS)"),
    ("deferred", "episodes_deferred", "behind a failed chunk of their conversation"),
    (
        "over_budget",
        "episodes_over_budget",
        "over the run's token or call budget, or their tenant's (SLOWWAVE_RUN_TOKEN_BUDGET, "
        "SLOWWAVE_TENANT_TOKEN_BUDGET, SLOWWAVE_RUN_CALL_BUDGET, SLOWWAVE_TENANT_CALL_BUDGET)",
    ),
    ("conflicted", "episodes_conflicted", "taken over by another run"),
    ("forgotten", "episodes_forgotten", "dropped: their conversation was forgotten"),
    (
        "quarantined",
        "episodes_left_quarantined",
        "quarantined, until an operator releases them (slowwave quarantine list)",
    ),
)


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
    episodes_over_budget: int = Field(
        default=0,
        description="Left for a later run: the run, or their tenant, had spent its token or "
        "call budget.",
    )
    episodes_conflicted: int = Field(
        default=0,
        description="Taken over by another run while this one worked (its lease had expired): "
        "theirs now, not a failure of the chunk.",
    )
    chunks_conflicted: int = Field(
        default=0, description="Chunks not applied because another run holds their episodes."
    )
    episodes_forgotten: int = Field(
        default=0,
        description="Dropped: their conversation was forgotten while the run worked on it "
        "(nothing about it recorded, no id kept).",
    )
    episodes_closed: int = Field(
        default=0,
        description="Open episodes this run closed as it started: a run that names its "
        "conversations (asked for explicitly) takes what was said up to that moment.",
    )
    episodes_open: int = Field(
        default=0,
        description="Left pending: still open, their conversation's last message younger than "
        "the segmentation gap (a run that names no conversation closes none).",
    )
    episodes_not_due: int = Field(
        default=0, description="Left pending: their conversation is not due yet (nightly rule)."
    )
    episodes_held_elsewhere: int = Field(
        default=0, description="Left pending: under another run's live lease."
    )
    episodes_over_cap: int = Field(
        default=0, description="Left pending: due, beyond the run's claim_max_conversations."
    )
    episodes_left_quarantined: int = Field(
        default=0,
        description="Quarantined episodes of the run's conversations (of every conversation for "
        "a run that names none), by this run or an earlier one: left until released.",
    )
    facts_inserted: int = 0
    facts_reinforced: int = 0
    facts_updated: int = 0
    facts_invalidated: int = 0
    dedupe_merges: int = 0
    actions_rejected: int = 0
    actions_ungrounded: int = Field(
        default=0,
        description="Of the actions rejected, facts whose name, number, date, email address "
        "or URL is in no message they cite and no fact shown (SLOWWAVE_GROUNDING).",
    )
    change_pairs: int = Field(
        default=0,
        description="Updates the model proposed without naming a fact, asked about with "
        "their nearest known fact about the same person (the change check).",
    )
    changes_found: int = Field(
        default=0,
        description="Of those, known facts that no longer held: updated by the new fact.",
    )
    second_look_messages: int = Field(
        default=0,
        description="People's messages no item of their chunk's answer covered, shown to the "
        "model again alone (the second look).",
    )
    second_look_facts: int = Field(
        default=0, description="Facts the second look stated, before the guard."
    )
    second_look_restated: int = Field(
        default=0,
        description="Statements shown to the second look that its answer left open, each in "
        "its speaker's first person, naming something and counting nothing: restated without "
        "the model, before the guard.",
    )
    gray_zone_pairs: int = Field(
        default=0, description="New facts near a known one, not duplicates: asked the model."
    )
    gray_zone_merges: int = Field(
        default=0, description="Gray-zone pairs judged the same and merged faithfully."
    )
    gray_zone_unfaithful: int = Field(
        default=0, description="Gray-zone merges refused: the merged sentence drifted."
    )
    profiles_written: int = Field(
        default=0, description="Conversation profiles written after the run."
    )
    profiles_failed: int = Field(
        default=0, description="Profiles whose answer failed: the old one kept, marked stale."
    )
    facts_evicted: int = Field(
        default=0, description="Active facts retired over a conversation's cap (evicted)."
    )
    answers_cut_off: int = Field(
        default=0,
        description="Answers that reached max_tokens: the items written whole were kept.",
    )
    model_refusals: int = Field(
        default=0,
        description="429s and 503s the model's endpoint answered before the answers the run "
        "applied (each waited out as its Retry-After said, fewer requests at once meanwhile).",
    )
    model_waited_s: float = Field(default=0.0, description="Seconds spent waiting them out.")
    prompt_tokens: int = Field(default=0, description="Prompt tokens billed (sent to the model).")
    completion_tokens: int = 0
    prompt_tokens_cached: int = Field(
        default=0,
        description="Of the billed prompt tokens, those the engine took from its prefix cache "
        "instead of computing them (0 where the engine does not say).",
    )
    stage_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="Seconds spent in each stage, summed over the shards (which run at the "
        "same time: the sum can exceed the run's wall time).",
    )
    failures: list[ChunkFailure] = Field(default_factory=list)
    shard_retries: list[str] = Field(
        default_factory=list,
        description="What a shard was retried after, one line each: a lost database "
        "connection, a restarted server, a lost actor (no chunk's fault: nothing charged).",
    )
    shards: int = Field(default=0, description="Shards that ran (each a Prefect task).")
    similarity: dict[str, SimilarityHistogram] = Field(
        default_factory=dict,
        description="Per decision action, the similarities its decisions carried (read from "
        "the decision log when the run ends).",
    )
    placement: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="Where the run's work ran: for `shards` and each actor pool (`embedding`, "
        "`llm`), how many ran on each node (a Ray node id, or the host name without Ray).",
    )

    @property
    def prompt_tokens_computed(self) -> int:
        """Prompt tokens the engine computed: the billed ones less what its cache served."""
        return self.prompt_tokens - self.prompt_tokens_cached

    def left_undone(self) -> dict[str, int]:
        """Episodes the run left undone, by reason (``LEFT_UNDONE``; only reasons that
        count)."""
        return left_undone(self.model_dump())

    def add_time(self, stage: str, seconds: float) -> None:
        self.stage_seconds[stage] = round(self.stage_seconds.get(stage, 0.0) + seconds, 4)

    def place(self, what: str, nodes: list[str]) -> None:
        """Count ``nodes`` (one entry per shard or actor) under ``what``."""
        counts = self.placement.setdefault(what, {})
        for node in nodes:
            counts[node] = counts.get(node, 0) + 1

    def merge(self, shard: RunSummary) -> None:
        """Add a shard's counts, tokens, stage times, failures and placement to the run's."""
        for name, info in RunSummary.model_fields.items():
            if info.annotation in (int, float) and name not in _RUN_LEVEL:
                total = getattr(self, name) + getattr(shard, name)
                setattr(self, name, round(total, 3) if info.annotation is float else total)
        for stage, seconds in shard.stage_seconds.items():
            self.add_time(stage, seconds)
        self.failures += shard.failures
        self.shard_retries += shard.shard_retries
        for what, counts in shard.placement.items():
            for node, n in counts.items():
                mine = self.placement.setdefault(what, {})
                mine[node] = mine.get(node, 0) + n

    def counter_rows(self) -> list[tuple[str, object]]:
        """The run's counters as (label, value), the one list every report shows."""
        return [
            ("conversations", self.conversations),
            ("chunks (model calls)", f"{self.chunks} ({self.model_calls})"),
            ("episodes consolidated", self.episodes_consolidated),
            ("  of which skipped by the gate", self.episodes_skipped),
            ("episodes quarantined", self.episodes_quarantined),
            ("left pending: deferred behind a failed chunk", self.episodes_deferred),
            ("left pending: taken over by another run", self.episodes_conflicted),
            ("left pending: over the token or call budget", self.episodes_over_budget),
            ("dropped: their conversation was forgotten", self.episodes_forgotten),
            ("episodes closed at the request", self.episodes_closed),
            ("left pending: still open", self.episodes_open),
            ("left pending: held by another run", self.episodes_held_elsewhere),
            ("left pending: not due yet", self.episodes_not_due),
            ("left pending: over the claim cap", self.episodes_over_cap),
            ("left quarantined (slowwave quarantine list)", self.episodes_left_quarantined),
            ("facts new", self.facts_inserted),
            ("facts merged by dedupe", self.dedupe_merges),
            ("profiles written (failed)", f"{self.profiles_written} ({self.profiles_failed})"),
            (
                "gray zone: pairs asked, merged, refused as unfaithful",
                f"{self.gray_zone_pairs}, {self.gray_zone_merges}, {self.gray_zone_unfaithful}",
            ),
            (
                "second look: messages asked about, facts stated, restated",
                f"{self.second_look_messages}, {self.second_look_facts}, "
                f"{self.second_look_restated}",
            ),
            (
                "change check: pairs asked, known facts updated",
                f"{self.change_pairs}, {self.changes_found}",
            ),
            ("facts reinforced", self.facts_reinforced),
            ("facts updated", self.facts_updated),
            ("facts invalidated", self.facts_invalidated),
            (
                "actions rejected by the guard (of them ungrounded)",
                f"{self.actions_rejected} ({self.actions_ungrounded})",
            ),
            ("facts evicted over the cap", self.facts_evicted),
            ("answers cut off at max_tokens (whole items kept)", self.answers_cut_off),
            (
                "shards retried (after what)",
                "; ".join(self.shard_retries) if self.shard_retries else 0,
            ),
            (
                "model refusals (429, 503) waited out, seconds",
                f"{self.model_refusals}, {self.model_waited_s:g}",
            ),
            ("tokens in / out", f"{self.prompt_tokens} / {self.completion_tokens}"),
            (
                "tokens in: computed (prefix cache)",
                f"{self.prompt_tokens_computed} ({self.prompt_tokens_cached})",
            ),
        ]
