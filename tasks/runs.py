"""The runs table: a row when a run starts, its summary when it ends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import psycopg
from psycopg.types.json import Jsonb

from models.ids import new_id
from models.run import RunSummary

if TYPE_CHECKING:
    from slowwave.db import Database

_COUNTS = (
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
    "completion_tokens",
)


def start_run(
    conn: psycopg.Connection, *, kind: str = "manual", flow_run_id: str | None = None
) -> RunSummary:
    summary = RunSummary(run_id=new_id(), kind=kind, started_at=datetime.now(UTC))
    with conn.transaction():
        conn.execute(
            "INSERT INTO consolidation_runs (id, flow_run_id, kind, started_at) "
            "VALUES (%s, %s, %s, %s)",
            (summary.run_id, flow_run_id, kind, summary.started_at),
        )
    return summary


def finish_run(conn: psycopg.Connection, summary: RunSummary, error: str | None = None) -> None:
    """Store the final counts; status says whether anything failed."""
    summary.finished_at = datetime.now(UTC)
    if error is not None or (summary.chunks and summary.chunks_failed == summary.chunks):
        summary.status = "failed"
    elif summary.chunks_failed:
        summary.status = "completed_with_failures"
    else:
        summary.status = "completed"
    assignments = ", ".join(f"{c} = %({c})s" for c in _COUNTS)
    values = {c: getattr(summary, c) for c in _COUNTS}
    with conn.transaction():
        conn.execute(
            f"UPDATE consolidation_runs SET {assignments}, status = %(status)s, "
            "finished_at = %(finished_at)s, summary = %(summary)s, error = %(error)s "
            "WHERE id = %(id)s",
            {
                **values,
                "status": summary.status,
                "finished_at": summary.finished_at,
                "summary": Jsonb(summary.model_dump(mode="json")),
                "error": error,
                "id": summary.run_id,
            },
        )


@contextmanager
def recorded_run(
    db: Database, *, kind: str = "manual", flow_run_id: str | None = None
) -> Iterator[RunSummary]:
    """A run row for the block: whatever happens, its claims are released and the outcome
    (counts, status, the error if one escaped) is stored."""
    from tasks.claim import release

    with db.connection() as conn:
        summary = start_run(conn, kind=kind, flow_run_id=flow_run_id)
    error: str | None = None
    try:
        yield summary
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        with db.connection() as conn:
            release(conn, summary.run_id)
            finish_run(conn, summary, error)
