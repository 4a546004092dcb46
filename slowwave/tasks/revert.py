"""Revert a run: undo everything it applied, in one transaction, so that a later run redoes
its episodes (a model upgrade that invalidated half the facts, a prompt bug).

What it wrote is removed: the facts it inserted (kept, ended where they began, only when a
fact of another run supersedes one), its decisions and chunk records, and its run row (kept,
marked ``reverted``, when one of its facts is). What it changed is put back: the facts it
ended hold again, the evidence it appended to other facts is removed, its episodes return to
pending with the attempts it charged taken back. A run that later runs built on (they applied
chunks in its conversations after it) is refused, unless asked to cascade: they are reverted
first, newest first. The operation is recorded in ``history_operations``.

A revert holds the runs' conversations exclusively (``tasks.forget.lock_conversations``) before
it reads anything: it waits for an apply already open on them, and no chunk is applied there
until it ends. A run in flight that already applied there is a run built on it (refused while
it runs); one that only claimed there gives its claim back (``revert_take_back``), so its
chunks of those conversations become conflicts and a later run redoes them in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from uuid import UUID

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from pydantic import BaseModel, Field

from slowwave import sql
from slowwave.models.errors import HistoryError
from slowwave.tasks.forget import lock_conversations, retry_on_deadlock


class RevertRefused(HistoryError):
    """The run cannot be reverted as asked."""


@dataclass
class RevertReport:
    """What a revert did, counted over every run it reverted."""

    runs: list[UUID] = field(default_factory=list)  # newest first, the asked one last
    facts_removed: int = 0
    facts_kept_ended: int = 0
    facts_restored: int = 0
    facts_evidence_removed: int = 0
    episodes_pending: int = 0
    decisions_removed: int = 0
    chunks_removed: int = 0
    run_rows_kept: int = 0
    profiles_stale: int = 0
    episodes_taken_back: int = 0  # claims of runs in flight on the reverted conversations


class RunRow(BaseModel):
    """A run as the runs list shows it (``slowwave runs list``, ``GET /v1/runs``): what it
    committed, counted from its chunks while it runs."""

    id: UUID
    kind: str
    status: str
    started_at: datetime
    finished_at: datetime | None = None
    flow_run_id: str | None = Field(default=None, description="Its Prefect flow run, if any.")
    host: str | None = Field(default=None, description="The machine whose process ran it.")
    pid: int | None = None
    conversations: int = 0
    chunks: int = 0
    chunks_failed: int = 0
    episodes_consolidated: int = 0
    episodes_skipped: int = 0
    episodes_quarantined: int = 0
    facts_inserted: int = 0
    facts_reinforced: int = 0
    facts_updated: int = 0
    facts_invalidated: int = 0
    dedupe_merges: int = 0
    actions_rejected: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_cached: int = 0
    error: str | None = None
    requested_by_tenant: str | None = Field(
        default=None, description="The tenant whose key asked for it (consolidate now)."
    )


def list_runs(conn: psycopg.Connection, limit: int = 20) -> list[RunRow]:
    """The latest runs, newest first, with their counts."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(sql.statement("runs_list"), {"limit": limit}).fetchall()
    return [RunRow.model_validate(row) for row in rows]


def check_revertable(conn: psycopg.Connection, run_id: UUID, *, cascade: bool) -> list[UUID]:
    """The runs a revert of ``run_id`` must undo first (newest first), or why it is refused:
    no such run, one still running or already reverted, later runs built on it without
    ``cascade``. Locks the run's row (inside the caller's transaction)."""
    status = conn.execute(sql.statement("run_status"), {"run_id": run_id}).fetchone()
    if status is None:
        raise RevertRefused(f"no run {run_id}")
    if status[0] in ("running", "reverted"):
        raise RevertRefused(f"run {run_id} is {status[0]}: there is nothing to revert")
    shared = [
        r[0] for r in conn.execute(sql.statement("revert_shared_episodes"), {"run_id": run_id})
    ]
    if shared:
        raise RevertRefused(
            f"run {run_id} finished episodes that run(s) {', '.join(map(str, shared))} began "
            "(a long episode in parts): revert the earliest of them with --cascade"
        )
    built = conn.execute(sql.statement("revert_dependents"), {"run_id": run_id}).fetchall()
    running = [r for r, status in built if status == "running"]
    if running:
        raise RevertRefused(f"run {running[0]}, built on it, is still running: wait for it to end")
    later = [r for r, _ in built]
    if later and not cascade:
        raise RevertRefused(
            f"run {run_id} is built on by {len(later)} later run(s) "
            f"({', '.join(str(r) for r in later)}): revert those first, or pass --cascade"
        )
    return later


def revert_run(
    conn: psycopg.Connection, run_id: UUID, *, by: str, reason: str, cascade: bool = False
) -> RevertReport:
    """Undo ``run_id`` (and, with ``cascade``, the runs that built on it) in one transaction."""
    if not reason.strip():
        raise RevertRefused("a revert needs a reason (--reason)")
    return _revert(conn, run_id, by=by, reason=reason, cascade=cascade)


# A cascade locks the later runs' conversations after its own: an apply holding one of them
# while waiting for another can meet it. Postgres breaks the cycle, the revert is rolled back
# whole, and it is simply done again.
@retry_on_deadlock
def _revert(
    conn: psycopg.Connection, run_id: UUID, *, by: str, reason: str, cascade: bool
) -> RevertReport:
    report = RevertReport()
    with conn.transaction():
        conversations = _conversations(conn, [run_id])
        lock_conversations(conn, conversations)
        later = check_revertable(conn, run_id, cascade=cascade)
        if later:
            conversations = sorted(set(conversations) | set(_conversations(conn, later)))
            lock_conversations(conn, conversations)
        report.episodes_taken_back = _count(
            conn, "revert_take_back", {"conversations": conversations}
        )
        for run in [*later, run_id]:
            _revert_one(conn, run, report)
        conn.execute(
            sql.statement("history_operation"),
            {
                "kind": "revert",
                "target": str(run_id),
                "by": by,
                "reason": reason,
                "rows": Jsonb(
                    {k: v for k, v in asdict(report).items() if k != "runs"}
                    | {"runs": [str(r) for r in report.runs]}
                ),
            },
        )
    return report


def _conversations(conn: psycopg.Connection, runs: list[UUID]) -> list[str]:
    rows = conn.execute(sql.statement("revert_conversations"), {"runs": runs}).fetchall()
    return sorted(r[0] for r in rows)


def _revert_one(conn: psycopg.Connection, run_id: UUID, report: RevertReport) -> None:
    params = {"run_id": run_id}
    report.runs.append(run_id)
    report.profiles_stale += _count(conn, "revert_profiles_stale", params)
    report.facts_restored += _count(conn, "revert_restore_ended", params)
    report.facts_evidence_removed += _count(conn, "revert_provenance", params)
    removed, kept = conn.execute(sql.statement("revert_facts"), params).fetchone() or (0, 0)
    report.facts_removed += int(removed)
    report.facts_kept_ended += int(kept)
    report.episodes_pending += _count(conn, "revert_episodes", params)
    decisions, chunks, row_kept = conn.execute(
        sql.statement("revert_records"), params
    ).fetchone() or (0, 0, 0)
    report.decisions_removed += int(decisions)
    report.chunks_removed += int(chunks)
    report.run_rows_kept += int(row_kept)


def _count(conn: psycopg.Connection, statement: str, params: Mapping[str, object]) -> int:
    return len(conn.execute(sql.statement(statement), params).fetchall())
