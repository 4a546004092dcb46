"""Messages an agent records, through the path a source file takes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from slowwave.models.ids import conversation_ref
from slowwave.models.tenant import conversation_key
from slowwave.sql.db import Database
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.read import Batch, validate
from slowwave.tasks.ingest.rejects import RejectsReport
from slowwave.tasks.ingest.report import IngestReport
from slowwave.tasks.ingest.segment import stage_and_segment


def record(
    db: Database,
    conversation_id: str,
    messages: Iterable[Mapping[str, Any]],
    policy: IngestPolicy,
) -> IngestReport:
    """Messages an agent records in the policy's tenant, through the path a source file takes:
    each validated (the transcript schema, the size limit), then staged, repeated message ids
    rejected, messages already recorded skipped, a forgotten conversation refused, and the rest
    segmented into episodes in event time, in one transaction. The report holds every reject,
    by position in ``messages`` (1 = the first); nothing is written beside."""
    source = f"recorded {conversation_ref(conversation_key(conversation_id, policy.tenant))}"
    batch = Batch()
    for line, message in enumerate(messages, start=1):
        batch.read += 1
        fields = {**message, "conversation_id": conversation_id}
        row, reject = validate(fields, line, source, policy.ingest.max_message_chars)
        if row is not None:
            batch.rows.append(row)
        elif reject is not None:
            batch.rejects.append(reject)
    report = IngestReport(source=source, format="record")
    with RejectsReport(None) as rejects, db.connection() as conn:
        stage_and_segment(conn, [batch], source, policy, report, rejects, None, (None, None))
        report.count_rejects(rejects)
    return report
