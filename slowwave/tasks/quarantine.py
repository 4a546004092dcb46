"""quarantine: what an operator sees of quarantined episodes, and how they are given back.

An episode is quarantined after ``max_attempts`` failed applies of its chunk, or at claim when
no cut makes it fit the model's context; it waits there, with its last error, until an
operator releases it (after fixing the cause: a model, a prompt, a setting). A release puts
it back to pending with its attempts reset, and is recorded in the decision log with the
operator's reason; the next run takes it (an episode claimed before is due).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

import psycopg
from psycopg.rows import class_row
from pydantic import BaseModel

from slowwave import sql


class QuarantinedEpisode(BaseModel):
    """A quarantined episode as ``slowwave quarantine list`` shows it."""

    id: UUID
    conversation_id: str
    external_key: str
    attempts: int
    last_error: str | None
    quarantined_at: datetime
    start_at: datetime
    end_at: datetime


def list_quarantined(
    conn: psycopg.Connection,
    *,
    conversations: Sequence[str] | None = None,
    tenant: str | None = None,
    limit: int = 1000,
) -> list[QuarantinedEpisode]:
    """Quarantined episodes (of ``conversations``, of the ``tenant``'s), oldest first."""
    with conn.cursor(row_factory=class_row(QuarantinedEpisode)) as cur:
        return cur.execute(
            sql.statement("quarantine_list"),
            {"conversations": _list(conversations), "tenant": tenant, "limit": limit},
        ).fetchall()


def release(
    conn: psycopg.Connection,
    reason: str,
    *,
    conversations: Sequence[str] | None = None,
    episodes: Sequence[UUID] | None = None,
) -> dict[str, int]:
    """Release quarantined episodes (of ``conversations``, or the ``episodes`` named; every one
    when neither is given); return how many per conversation."""
    if not reason.strip():
        raise ValueError("a release needs a reason (who asked, and why)")
    with conn.transaction():
        rows = conn.execute(
            sql.statement("quarantine_release"),
            {
                "conversations": _list(conversations),
                "episodes": list(episodes) if episodes is not None else None,
                "reason": reason,
            },
        ).fetchall()
    return {str(conversation): int(count) for conversation, count in rows}


def _list(values: Sequence[str] | None) -> list[str] | None:
    return list(values) if values is not None else None
