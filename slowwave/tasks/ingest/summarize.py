"""summarize: model-written summaries for ingested episodes whose source had none.

Pending episodes without a summary are sent to the model runtime in batches; each answer is
parsed strictly (``models.summary.EpisodeSummary``) and the summaries are written with one
statement per batch. An episode whose answer fails keeps no summary (predict then embeds its
messages) and is counted; nothing stops the batch. An episode no longer than a summary would
be (``min_chars``, ``SLOWWAVE_SUMMARY_MIN_CHARS``) is not sent: its transcript is its own
summary, and the call would cost more than the episode.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row
from pydantic import ValidationError

from slowwave import sql
from slowwave.models.episode import Episode, Message
from slowwave.models.llm.base import GenerationRequest, Purpose, StructuredModel, generate_watched
from slowwave.models.summary import (
    MAX_SUMMARY_CHARS,
    SUMMARY_SYSTEM_PROMPT,
    EpisodeSummary,
    render_summary_prompt,
)


@dataclass
class SummaryReport:
    summarized: int = 0
    failed: int = 0
    short: int = 0  # too short to need one: no call made
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served by the engine's prefix cache


def summarize_missing(
    conn: psycopg.Connection,
    model: StructuredModel,
    *,
    batch: int = 64,
    conversations: list[str] | None = None,
    min_chars: int = MAX_SUMMARY_CHARS,
) -> SummaryReport:
    """Write a summary for every pending episode that has none and whose transcript is longer
    than ``min_chars``."""
    scope = {"conversations": conversations, "min_chars": min_chars}
    short = conn.execute(sql.statement("summarize_short"), scope).fetchone()
    report = SummaryReport(short=int(short[0]) if short else 0)
    offset = 0  # episodes whose answer failed stay without summary: step past them
    schema = EpisodeSummary.response_schema()
    while True:
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                sql.statement("summarize_pending"),
                {**scope, "batch": batch, "offset": offset},
            ).fetchall()
        if not rows:
            return report
        episodes = [
            Episode(**{**r, "messages": [Message.model_validate(m) for m in r["messages"]]})
            for r in rows
        ]
        requests = [
            GenerationRequest(
                chunk_id=str(e.id),
                purpose=Purpose.summarize,
                system=SUMMARY_SYSTEM_PROMPT,
                user=render_summary_prompt(e),
                json_schema=schema,
            )
            for e in episodes
        ]
        ids, summaries = [], []
        for answer in generate_watched(model, requests):
            report.prompt_tokens += answer.prompt_tokens
            report.completion_tokens += answer.completion_tokens
            report.cached_tokens += answer.cached_tokens
            try:
                parsed = EpisodeSummary.model_validate_json((answer.text or "").strip())
            except ValidationError:
                report.failed += 1
                continue
            text = " ".join(parsed.summary.split())[:MAX_SUMMARY_CHARS]
            if not text:
                report.failed += 1
                continue
            ids.append(answer.chunk_id)
            summaries.append(text)
        with conn.transaction():
            conn.execute(sql.statement("summarize_write"), {"ids": ids, "summaries": summaries})
        report.summarized += len(ids)
        offset += len(rows) - len(ids)
