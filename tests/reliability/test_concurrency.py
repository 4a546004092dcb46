"""Runs at once on one database, and a run that overlaps another after its lease expired:
every episode consolidated exactly once, no attempt charged, no deadlock unhandled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from slowwave.models import faultpoints
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.load import load_episodes
from tests.fix_db import TABLES
from tests.reliability.crash_child import settings_for
from tests.reliability.fix_commands import CommandModel, HashEmbedder, story_episodes
from tests.reliability.fix_crash import run_at_once
from tests.reliability.fix_outcome import broken_invariants, outcome

RUNS = 4
CONVERSATIONS = 12


def clean_outcome(db: Database, home: Path, conversations: int) -> Any:
    """What one run alone makes of ``conversations`` stories; the database emptied after."""
    with db.connection() as conn:
        load_episodes(conn, story_episodes(conversations))
    consolidate(db, CommandModel(), HashEmbedder(), settings_for(db.url, home), kind="backfill")
    with db.connection() as conn:
        seen = outcome(conn)
        conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
    return seen


@pytest.mark.slow
def test_four_runs_at_once_consolidate_every_episode_exactly_once(
    db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:
    clean = clean_outcome(db, tmp_path, CONVERSATIONS)
    load_episodes(conn, story_episodes(CONVERSATIONS))
    conn.commit()
    per_run = CONVERSATIONS // RUNS  # each run claims its share while the others run
    run_at_once(db, tmp_path, RUNS, per_run)  # all claim at the same moment

    runs = conn.execute(
        "SELECT status, conversations, chunks_failed FROM consolidation_runs"
    ).fetchall()
    assert sorted(runs) == [("completed", per_run, 0)] * RUNS  # each took its own share
    assert broken_invariants(conn) == {}
    assert outcome(conn) == clean
    (overlapping,) = conn.execute(
        "SELECT count(*) FROM consolidation_runs a JOIN consolidation_runs b "
        "ON a.id < b.id AND a.started_at < b.finished_at AND b.started_at < a.finished_at"
    ).fetchone()  # type: ignore[misc]
    assert overlapping == RUNS * (RUNS - 1) // 2  # every run ran while every other ran


def test_a_run_whose_lease_expired_loses_its_work_to_another_run_without_being_charged(
    db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:
    clean = clean_outcome(db, tmp_path, 3)
    load_episodes(conn, story_episodes(3))
    conn.commit()
    settings = settings_for(db.url, tmp_path)
    overtaking: list[Any] = []

    def stall_past_the_lease(point: str, _: object) -> None:
        """Run A stalls after the model answered; its leases expire; run B takes over."""
        with db.connection() as c:
            c.execute(
                "UPDATE episodic_memory SET claimed_until = now() - interval '1 second' "
                "WHERE claimed_by IS NOT NULL"
            )
        overtaking.append(
            consolidate(db, CommandModel(), HashEmbedder(), settings, kind="backfill")
        )

    faultpoints.arm("model.answered", stall_past_the_lease)
    try:
        first = consolidate(db, CommandModel(), HashEmbedder(), settings, kind="backfill")
    finally:
        faultpoints.disarm()

    (second,) = overtaking
    assert second.episodes_consolidated == 3 * 7 and second.chunks_failed == 0
    assert first.episodes_consolidated == 0 and first.chunks_failed == 0
    assert first.chunks_conflicted == 3  # its first chunk of each conversation: B's now
    assert broken_invariants(conn) == {}
    (charged,) = conn.execute("SELECT count(*) FROM episodic_memory WHERE attempts > 0").fetchone()  # type: ignore[misc]
    assert charged == 0
    assert outcome(conn) == clean
