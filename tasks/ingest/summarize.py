"""summarize: model-written summaries for ingested episodes whose source had none.

Pending episodes without a summary are sent to the model runtime in batches; each answer is
parsed strictly (``models.summary.EpisodeSummary``) and the summaries are written with one
statement per batch. An episode whose answer fails keeps no summary (predict then embeds its
messages) and is counted; nothing stops the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row
from pydantic import ValidationError

from models.episode import Episode, Message
from models.llm.base import ConsolidationModel, ConsolidationRequest
from models.summary import (
    MAX_SUMMARY_CHARS,
    SUMMARY_SYSTEM_PROMPT,
    EpisodeSummary,
    render_summary_prompt,
)

_SELECT = """
SELECT id, conversation_id, external_key, messages, summary, surprise, start_at, end_at
FROM episodic_memory
WHERE summary IS NULL AND consolidated_at IS NULL AND quarantined_at IS NULL
  AND (%(conversations)s::text[] IS NULL OR conversation_id = ANY(%(conversations)s::text[]))
ORDER BY conversation_id, start_at, id
LIMIT %(batch)s OFFSET %(offset)s
"""

_UPDATE = """
UPDATE episodic_memory e SET summary = s.summary
FROM unnest(%(ids)s::uuid[], %(summaries)s::text[]) AS s(id, summary)
WHERE e.id = s.id AND e.summary IS NULL
"""


@dataclass
class SummaryReport:
    summarized: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def summarize_missing(
    conn: psycopg.Connection,
    model: ConsolidationModel,
    *,
    batch: int = 64,
    conversations: list[str] | None = None,
) -> SummaryReport:
    """Write a summary for every pending episode that has none."""
    report = SummaryReport()
    offset = 0  # episodes whose answer failed stay without summary: step past them
    schema = EpisodeSummary.response_schema()
    while True:
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                _SELECT, {"conversations": conversations, "batch": batch, "offset": offset}
            ).fetchall()
        if not rows:
            return report
        episodes = [
            Episode(**{**r, "messages": [Message.model_validate(m) for m in r["messages"]]})
            for r in rows
        ]
        requests = [
            ConsolidationRequest(
                chunk_id=str(e.id),
                system=SUMMARY_SYSTEM_PROMPT,
                user=render_summary_prompt(e),
                json_schema=schema,
            )
            for e in episodes
        ]
        ids, summaries = [], []
        for answer in model.consolidate(requests):
            report.prompt_tokens += answer.prompt_tokens
            report.completion_tokens += answer.completion_tokens
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
            conn.execute(_UPDATE, {"ids": ids, "summaries": summaries})
        report.summarized += len(ids)
        offset += len(rows) - len(ids)
