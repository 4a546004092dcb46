"""The runs table: a row when a run starts, its summary when it ends.

A run's counts are what it committed (migration 0026, ``slowwave_run_counts``): a run still
marked running, at work or killed before it could say so, is read with the counts of its
recorded chunks; a run found dead is stored with them; a run that ends stores, count by count,
the larger of them and its own.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

import psutil
import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from slowwave import sql
from slowwave.models.ids import new_id
from slowwave.models.run import (
    RUN_COUNTS,
    SIMILARITY_BOUNDS,
    RunRequest,
    RunSummary,
    SimilarityHistogram,
    left_undone,
    undone_note,
)
from slowwave.models.settings import setting_default
from slowwave.tasks.claim import release, renew
from slowwave.tasks.forget import hold_conversations

if TYPE_CHECKING:
    from slowwave.sql.db import Database

logger = logging.getLogger(__name__)


def start_run(
    conn: psycopg.Connection,
    *,
    kind: str = "manual",
    flow_run_id: str | None = None,
    request: RunRequest | None = None,
) -> RunSummary:
    """A run's row (``request``: its id, given at once to the tenant that asked for it)."""
    run_id = request.run_id if request is not None else new_id()
    summary = RunSummary(run_id=run_id, kind=kind, started_at=datetime.now(UTC))
    with conn.transaction():
        conn.execute(
            sql.statement("run_start"),
            {
                "id": summary.run_id,
                "flow_run_id": flow_run_id,
                "kind": kind,
                "started_at": summary.started_at,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "requested_by_tenant": request.tenant if request is not None else None,
            },
        )
    return summary


def mark_crashed(conn: psycopg.Connection, lease_s: int) -> list[UUID]:
    """Mark the runs that died as crashed, with the counts of what they committed; return
    them. Every run does this as it starts, and `slowwave runs` before it shows them.

    Dead: on this host, its process is gone (or the pid now belongs to a younger process):
    its leases are given back at once, so a run restarted after a kill does not wait out
    ``claim_lease_s``. On another host, whose processes cannot be seen: it holds no live lease
    and started more than a lease ago (a live run renews its leases every third of one).
    Giving back a dead run's claims is safe even if some worker of it still lived: apply
    re-checks, under lock, that the run still holds every episode it writes.
    """
    here = socket.gethostname()
    now = datetime.now(UTC)
    dead = []
    for run_id, host, pid, started_at, leasing in conn.execute(
        sql.statement("runs_running")
    ).fetchall():
        if host == here and pid is not None:
            if not _process_gone(pid, started_at):
                continue
        elif leasing or (now - started_at).total_seconds() < lease_s:
            continue
        dead.append(run_id)
    if not dead:
        return []
    with conn.transaction():
        rows = conn.execute(
            sql.statement("runs_mark_crashed"),
            {"ids": dead, "reason": "the run's process died; counts from its committed chunks"},
        ).fetchall()
        crashed = [r[0] for r in rows]
        release(conn, *crashed)
    return crashed


def _process_gone(pid: int, started_at: datetime) -> bool:
    try:
        created = datetime.fromtimestamp(psutil.Process(pid).create_time(), UTC)
    except psutil.NoSuchProcess:
        return True
    return created > started_at  # the pid was reused by a process started after the run


def finish_run(
    conn: psycopg.Connection,
    summary: RunSummary,
    error: str | None = None,
    *,
    interrupted: bool = False,
) -> None:
    """Store the final counts; status says whether anything failed, or that the operator
    interrupted the run (what it applied before stays; its claims were given back)."""
    summary.finished_at = datetime.now(UTC)
    count_committed(conn, summary)
    if interrupted:
        summary.status = "interrupted"
    elif error is not None or (summary.chunks and summary.chunks_failed == summary.chunks):
        summary.status = "failed"
    elif summary.chunks_failed:
        summary.status = "completed_with_failures"
    else:
        summary.status = "completed"
    summary.similarity = decision_similarity(conn, summary.run_id)
    with conn.transaction():
        # a conversation forgotten since its chunk failed is named nowhere, here neither
        forgotten = hold_conversations(conn, (f.conversation_id for f in summary.failures))
        summary.failures = [f for f in summary.failures if f.conversation_id not in forgotten]
        conn.execute(
            sql.statement("run_finish"),
            {
                **summary.model_dump(),
                "summary": Jsonb(summary.model_dump(mode="json")),
                "error": error,
            },
        )


def count_committed(conn: psycopg.Connection, summary: RunSummary) -> None:
    """Raise each of the summary's counts to what the run committed, where its process counted
    less: an interrupted process loses the counts of the shards it was waiting on. Read while
    the run is still marked running (so, from its chunks), after its claims were given back: a
    chunk whose transaction held some of them is committed by then."""
    row = show_run(conn, summary.run_id)
    if row is None:
        return
    for name in RUN_COUNTS:
        setattr(summary, name, max(getattr(summary, name), int(row[name])))


def show_run(conn: psycopg.Connection, run_id: UUID) -> dict[str, Any] | None:
    """One run's row, its counts what it committed while it is marked running (statement
    runs_show, the columns of runs_list and more), and once it ended what it left undone by
    reason (``left_undone``, empty while it runs) with a sentence that says so (``note``);
    None when there is no such run."""
    with conn.cursor(row_factory=dict_row) as cur:
        row: dict[str, Any] | None = cur.execute(
            sql.statement("runs_show"), {"run_id": run_id}
        ).fetchone()
    if row is None:
        return None
    stored = row.pop("summary")
    ended = row["finished_at"] is not None and isinstance(stored, dict)
    row["left_undone"] = left_undone(stored) if ended else {}
    row["note"] = undone_note(row["left_undone"]) if ended else None
    return row


def decision_similarity(conn: psycopg.Connection, run_id: UUID) -> dict[str, SimilarityHistogram]:
    """The run's decision similarities per action, as histograms over ``SIMILARITY_BOUNDS``."""
    rows = conn.execute(
        sql.statement("decision_similarity"),
        {"run_id": run_id, "bounds": list(SIMILARITY_BOUNDS)},
    ).fetchall()
    return {
        action: SimilarityHistogram(buckets=list(buckets), total=float(total), count=int(count))
        for action, buckets, total, count in rows
    }


class LeaseRenewal:
    """Renews a run's leases every ``interval_s`` on a thread of its own, so that a run that
    works longer than ``claim_lease_s`` keeps what it claimed: no other run takes over a
    conversation the run is still working on. A renewal that fails (the database is briefly
    away) is logged and tried again at the next tick; the lease is long enough to survive a
    few missed renewals."""

    def __init__(self, db: Database, run_id: UUID, lease_s: int) -> None:
        self.db, self.run_id, self.lease_s = db, run_id, lease_s
        self.interval_s = max(lease_s / 3, 1.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"slowwave-lease-{run_id}", daemon=True
        )

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                with self.db.connection() as conn:
                    renew(conn, self.run_id, self.lease_s)
            except Exception as exc:  # the next tick tries again; apply re-checks the claim
                logger.warning("could not renew the leases of run %s: %s", self.run_id, exc)

    def __enter__(self) -> LeaseRenewal:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def recorded_run(
    db: Database,
    *,
    kind: str = "manual",
    flow_run_id: str | None = None,
    lease_s: int | None = None,
    request: RunRequest | None = None,
) -> Iterator[RunSummary]:
    """A run row for the block: while it runs its leases are renewed (every third of
    ``lease_s``, when given); whatever happens, its claims are released and the outcome
    (counts, status, the error if one escaped) is stored."""
    with db.connection() as conn:
        crashed = mark_crashed(conn, lease_s or setting_default("claim_lease_s"))
        if crashed:
            logger.warning("marked %d run(s) whose process died as crashed", len(crashed))
        summary = start_run(conn, kind=kind, flow_run_id=flow_run_id, request=request)
    error: str | None = None
    interrupted = False
    renewal: AbstractContextManager[object] = (
        LeaseRenewal(db, summary.run_id, lease_s) if lease_s is not None else nullcontext()
    )
    try:
        with renewal:
            yield summary
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    except BaseException as exc:  # Ctrl-C, SIGTERM, a cancellation from Prefect
        interrupted = True
        error = (
            "interrupted by the operator (SIGINT)"
            if isinstance(exc, KeyboardInterrupt)
            else f"stopped: {type(exc).__name__} {exc}".strip()
        )
        raise
    finally:
        with db.connection() as conn:
            release(conn, summary.run_id)
            finish_run(conn, summary, error, interrupted=interrupted)
