"""Settings: what a run consolidates, and how."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings

from slowwave.models.settings.group import group_config


class ConsolidationSettings(BaseSettings):
    """What a run consolidates and how (seed 001 / 000 thresholds): due conversations,
    chunks, the gate, dedupe, the gray zone, claims, slots, profiles, quarantine, the hold."""

    model_config = group_config("SLOWWAVE_")

    episode_threshold: int = Field(
        default=3,
        ge=1,
        description="A conversation is due once it has this many unconsolidated episodes.",
    )
    flashbulb_surprise: float = Field(
        default=0.85,
        ge=0,
        le=1,
        description="An episode with at least this surprise forces consolidation of its "
        "conversation and asks the model for deeper extraction.",
    )
    chunk_size: int = Field(
        default=2,
        ge=1,
        description="Episodes given to the model in one call (more short ones where "
        "`chunk_min_tokens` is set). A small local model extracts more from 2 than from 8 "
        "(benchmarks/locomo_extraction.py); a larger model can take more, for fewer tokens. "
        "Chunks are also cut to fit "
        "the runtime's context (its length less the answer's `llm_max_tokens`, the prompt, "
        "the facts shown and a 5% margin), and an episode too long alone is consolidated in "
        "parts, by messages.",
    )
    chunk_min_tokens: int = Field(
        default=0,
        ge=0,
        description="A chunk of `chunk_size` episodes takes more while all of them come to at "
        "most this many prompt tokens (0: never). Every call sends the whole system prompt "
        "(772 tokens), so short episodes that share a call cost fewer tokens, and the small "
        "default model extracts fewer facts from the larger chunk: at 768, LoCoMo sessions "
        "arriving as episodes of 4 messages cost 5.1 tokens per transcript token instead of "
        "8.0, at fact recall 0.100 instead of 0.218 (`benchmarks.nightly_cost "
        "--episode-messages 4`). For a larger model, or where tokens count more than recall.",
    )
    chunk_lone_joins: bool = Field(
        default=True,
        description="A conversation's last episode, which `chunk_size` would leave alone in a "
        "chunk, joins the chunk before it (while the context allows): one call fewer, and "
        "every call sends the whole system prompt.",
    )
    related_facts_limit: int = Field(
        default=20, ge=0, description="Most existing facts shown to the model per chunk."
    )
    gate_min_chars: int = Field(
        default=50,
        ge=0,
        description="Gate: an episode whose message text is shorter than this ...",
    )
    gate_max_surprise: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="... and whose surprise is below this is consolidated without a model "
        "call (counted as skipped).",
    )
    dedupe_threshold: float = Field(
        default=0.95,
        gt=0,
        le=1,
        description="Cosine similarity at or above which a new fact merges into an existing one.",
    )
    gray_zone_merge: bool = Field(
        default=False,
        description="Ask the model whether a new fact whose nearest active fact is close but "
        "not a duplicate (cosine from `gray_zone_lower` to `dedupe_threshold`) says the same, "
        "one request per chunk; a faithful merged sentence updates the known fact.",
    )
    change_check: bool = Field(
        default=True,
        description="Check an update the model proposed without naming the fact it updates, "
        "and each fact of the second look, against its nearest known fact about the same "
        "person (cosine from `gray_zone_lower` to `dedupe_threshold`), a short request per "
        "pair: when the model's rewrite of the known fact swaps one of its values for the new "
        "one's, the new one updates it (lineage, ended in event time) instead of standing "
        "beside it.",
    )
    second_look: bool = Field(
        default=True,
        description="Show a person's messages that no item of a chunk's answer covers to the "
        "model again, alone with who said them, in one short request (shared by "
        "chunks of one tenant while it shows at most `second_look_messages`): what "
        "they state is written as new facts, and the change check asks whether each ends a "
        "known fact about the same person.",
    )
    second_look_messages: int = Field(
        default=6,
        ge=0,
        description="Second look: at most this many uncovered messages a chunk, those that say "
        "the most (0 turns it off).",
    )
    gray_zone_lower: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="Gray zone: below this cosine a new fact is never a merge candidate.",
    )
    merge_faithfulness: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description="Gray zone: a merged sentence is kept only if its cosine to each of the two "
        "facts it merges is at least this.",
    )
    dedupe_candidates: int = Field(
        default=5, ge=1, description="Nearest active facts checked for a duplicate."
    )
    claim_lease_s: int = Field(
        default=3600,
        ge=10,
        description="Seconds a run's claim on a conversation lasts (at least 10); a running run "
        "renews it every third of that, a crashed run's work is taken up again once it expires.",
    )
    due_after_s: int = Field(
        default=7 * 24 * 3600,
        ge=0,
        description="An episode pending this long (since it was recorded) makes its "
        "conversation due even below the episode threshold, so a conversation that stops at "
        "one or two episodes is consolidated within a week, not left behind for ever.",
    )
    claim_max_conversations: int = Field(
        default=10000, ge=1, description="Most conversations one run claims."
    )
    run_token_budget: int | None = Field(
        default=None,
        ge=1,
        description="Billed tokens (prompt + answer, every call of a chunk, failed ones too) "
        "one run may spend, over all its shards; unset: no budget. Once spent, no new chunk is "
        "opened, those in flight finish, and the rest is left pending for the next run "
        "(left undone: over_budget).",
    )
    tenant_token_budget: int | None = Field(
        default=None,
        ge=1,
        description="Billed tokens one run may spend on one tenant's conversations; unset: no "
        "budget. One tenant's spending never stops another's conversations.",
    )
    run_call_budget: int | None = Field(
        default=None,
        ge=1,
        description="Model calls (every request of a chunk: its own, a second look's, a change "
        "check's, failed ones too) one run may make, over all its shards; unset: no budget. "
        "Reached, it stops the run as the token budget does.",
    )
    tenant_call_budget: int | None = Field(
        default=None,
        ge=1,
        description="Model calls one run may make for one tenant's conversations; unset: no "
        "budget.",
    )
    max_active_facts: int = Field(
        default=0,
        ge=0,
        description="Most active facts a conversation keeps (0: no cap). Over it, apply retires "
        "the never or least recently retrieved, least corroborated ones: invalidated with the "
        "reason `evicted` in the decision log, never deleted.",
    )
    slots: bool = Field(
        default=True,
        description="Keep one active fact per conversation and slot (a single-valued attribute "
        "the model names: identity:location:ana): a new value in a filled slot updates the "
        "fact that held it even when the model answered `new`. Off: slots are ignored.",
    )
    profiles: bool = Field(
        default=False,
        description="After each run, have the model write a profile of every conversation whose "
        "active facts the run changed (`slowwave profile`, `Memory.profile`): one request per "
        "conversation, all in one call.",
    )
    profile_max_tokens: int = Field(
        default=300, ge=16, description="Longest profile, in estimated tokens."
    )
    profile_input_tokens: int = Field(
        default=3000,
        ge=64,
        description="Facts shown to the model for a profile, in estimated tokens: the best "
        "corroborated first.",
    )
    max_attempts: int = Field(
        default=3,
        ge=1,
        description="Failed applies of a chunk before its episodes are quarantined.",
    )
    grounding: Literal["off", "literals", "names"] = Field(
        default="names",
        description="What a fact to be written must find in its chunk's messages or the facts "
        "shown to the model, else it is refused and logged with the span: `literals` (email "
        "addresses, URLs, numbers and amounts, years, months and days), `names` (those and "
        "proper names) or `off`. `names` refuses 8 of LoCoMo's 1,755 gold observations "
        "checked against their own session (`literals` 1): names the model invents cost more.",
    )
    check_speaker: bool = Field(
        default=True,
        description="Check whom a fact about one speaker of a chunk (it starts with their name "
        "and names no other) is about: when, names masked, another speaker's message is nearer "
        "to it than every message of its subject by more than 0.2, a new fact is given to that "
        "speaker (the decision log says so) unless a pronoun of the subject's would stay, and "
        "is otherwise refused, as is one a fact shown says of another speaker: the small "
        "default model hands one speaker's words to the other. Every such fact it wrote on "
        "LoCoMo's first two sessions was the other speaker's. Refusals are logged as "
        "ungrounded, the subject's name the span.",
    )
    hold_ending_share: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="A plan that would end (update or invalidate) more than this share of the "
        "facts shown to the model is held for review: its episodes are quarantined with the "
        "reason, nothing is applied (a prompt injection obeyed, a broken model). 1 turns the "
        "hold off, e.g. for a run an operator approved after `slowwave quarantine release`.",
    )
    hold_ending_min: int = Field(
        default=3,
        ge=1,
        description="The hold applies only to plans that would end at least this many facts "
        "(ending 1 of 1 fact shown is an ordinary update).",
    )
