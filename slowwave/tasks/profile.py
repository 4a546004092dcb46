"""profile: a model-written profile of each conversation whose facts a run changed.

After a run's shards, the conversations whose active facts it changed (and those whose
profile went stale) get a new profile: their active facts, the best corroborated first, packed
into ``input_tokens``, one request per conversation and every request in one ``generate``
call. The answer is kept within ``max_tokens`` (cut at the last whole sentence that fits) and
written with one statement. A conversation whose answer fails keeps its old profile, marked
stale, and is tried again after the next run: a profile never fails a run.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import psycopg
from psycopg.rows import dict_row
from pydantic import BaseModel, Field, ValidationError

from slowwave import sql
from slowwave.models.ids import conversation_ref
from slowwave.models.llm.base import (
    GenerationRequest,
    ModelAnswer,
    Purpose,
    StructuredModel,
    generate_watched,
)
from slowwave.models.llm.tokens import average_tokens
from slowwave.models.profile import (
    PROFILE_SYSTEM_PROMPT,
    ConversationProfile,
    render_profile_prompt,
)
from slowwave.models.run import RunSummary
from slowwave.models.settings import ConsolidationSettings
from slowwave.sql.db import Database
from slowwave.tasks.forget import hold_conversations

logger = logging.getLogger(__name__)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class Profile(BaseModel):
    """A conversation's stored profile."""

    conversation_id: str
    profile: str | None = Field(description="None while none could be written.")
    facts: int = Field(description="Active facts it was written from.")
    tokens: int = Field(description="Its estimated tokens (four characters a token).")
    model: str | None
    run_id: UUID | None = Field(description="The run that wrote it; None: written on demand.")
    stale: bool = Field(description="The facts changed since it was written.")
    updated_at: datetime


@dataclass
class ProfileReport:
    written: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served by the engine's prefix cache


def changed_conversations(conn: psycopg.Connection, run_id: UUID) -> list[str]:
    """The conversations whose facts ``run_id`` changed, and those whose profile is stale."""
    rows = conn.execute(sql.statement("profile_changed"), {"run_id": run_id}).fetchall()
    return [r[0] for r in rows]


def refresh_profiles(
    conn: psycopg.Connection,
    model: StructuredModel,
    conversations: Sequence[str],
    policy: ConsolidationSettings,
    *,
    run_id: UUID | None = None,
) -> ProfileReport:
    """Write the profile of each of ``conversations`` from its active facts (one model call for
    all of them); a failed answer leaves the old profile, marked stale."""
    report = ProfileReport()
    if not conversations:
        return report
    facts: dict[str, list[tuple[str, str]]] = {c: [] for c in conversations}
    for conversation, category, fact in conn.execute(
        sql.statement("profile_facts"), {"conversations": list(conversations)}
    ):
        facts[conversation].append((category, fact))
    asked = [c for c in conversations if facts[c]]
    # a token: about four characters, three quarters of a word
    words = max(1, policy.profile_max_tokens * 3 // 4)
    requests = [
        GenerationRequest(
            chunk_id=f"profile:{c}",
            purpose=Purpose.profile,
            system=PROFILE_SYSTEM_PROMPT,
            user=render_profile_prompt(_fit(facts[c], policy.profile_input_tokens), words),
            json_schema=ConversationProfile.response_schema(),
        )
        for c in asked
    ]
    written: dict[str, str | None] = dict.fromkeys(conversations)
    for conversation, answer in zip(asked, _answers(model, requests), strict=True):
        report.prompt_tokens += answer.prompt_tokens
        report.completion_tokens += answer.completion_tokens
        report.cached_tokens += answer.cached_tokens
        try:
            parsed = ConversationProfile.model_validate_json((answer.text or "").strip())
        except ValidationError:
            logger.warning(
                "profile of %s: the answer is not a profile: kept stale",
                conversation_ref(conversation),
            )
            report.failed += 1
            continue
        text = within(" ".join(parsed.profile.split()), policy.profile_max_tokens)
        if not text:
            report.failed += 1
            continue
        written[conversation] = text
        report.written += 1
    with conn.transaction():
        forgotten = hold_conversations(conn, conversations)  # while the model wrote
        conversations = [c for c in conversations if c not in forgotten]
        conn.execute(
            sql.statement("profile_write"),
            {
                "conversations": list(conversations),
                "profiles": [written[c] for c in conversations],
                "facts": [len(facts[c]) for c in conversations],
                "tokens": [average_tokens(written[c] or "") for c in conversations],
                "ok": [written[c] is not None for c in conversations],
                "model": model.name,
                "run_id": run_id,
            },
        )
    return report


def profile_run(
    db: Database, model: StructuredModel, summary: RunSummary, policy: ConsolidationSettings
) -> None:
    """After a run: refresh the profiles of the conversations it changed (when on)."""
    if not policy.profiles:
        return
    start = time.perf_counter()
    with db.connection() as conn:
        conversations = changed_conversations(conn, summary.run_id)
        report = refresh_profiles(conn, model, conversations, policy, run_id=summary.run_id)
    summary.profiles_written += report.written
    summary.profiles_failed += report.failed
    summary.model_calls += report.written + report.failed
    summary.prompt_tokens += report.prompt_tokens
    summary.completion_tokens += report.completion_tokens
    summary.prompt_tokens_cached += report.cached_tokens
    summary.add_time("profile", time.perf_counter() - start)


def _answers(model: StructuredModel, requests: list[GenerationRequest]) -> list[ModelAnswer]:
    """The model's answers; a runtime that fails answers each request with its error (the
    profiles stay stale, the run stands)."""
    if not requests:
        return []
    try:
        return generate_watched(model, requests)
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        logger.warning("profiles: the model runtime failed (%s): kept stale", reason)
        return [ModelAnswer(r.chunk_id, None, reason) for r in requests]


def read_profile(conn: psycopg.Connection, conversation_id: str) -> Profile | None:
    """The stored profile of ``conversation_id``, if any."""
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            sql.statement("profile_read"), {"conversation_id": conversation_id}
        ).fetchone()
    return Profile.model_validate(row) if row else None


def within(text: str, max_tokens: int) -> str:
    """``text`` if it fits ``max_tokens``, else its longest run of whole sentences that does
    (the first sentence cut at a word when even it does not)."""
    if average_tokens(text) <= max_tokens:
        return text
    kept = ""
    for sentence in _SENTENCE_END.split(text):
        candidate = f"{kept} {sentence}".strip()
        if average_tokens(candidate) > max_tokens:
            break
        kept = candidate
    if kept:
        return kept
    return text[: max_tokens * 4].rsplit(" ", 1)[0]


def _fit(facts: Sequence[tuple[str, str]], budget: int) -> list[tuple[str, str]]:
    """The facts, in order, while their lines fit ``budget`` tokens."""
    kept, used = [], 0
    for category, fact in facts:
        cost = average_tokens(f"- [{category}] {fact}") + 1
        if used + cost > budget:
            break
        kept.append((category, fact))
        used += cost
    return kept
