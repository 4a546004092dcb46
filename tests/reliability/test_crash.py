"""SIGKILL of the consolidating process at every fault point, then a second run: the database
ends as a clean run leaves it, whatever moment the first run died at.

The killed run names its conversations, as a run asked for explicitly does, and each one's
last episode is still open (its message a minute old): the run closes them first. The second
run names none, as the nightly run: it takes the closed episodes only because the close was
committed, so a run killed after closing still ends with every episode consolidated once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from slowwave.models.faultpoints import RUN_POINTS
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.load import load_episodes
from tests.fix_db import TABLES
from tests.reliability.crash_child import pending_conversations, settings_for
from tests.reliability.fix_commands import CommandModel, HashEmbedder, story_episodes
from tests.reliability.fix_crash import hit_for, kill_at
from tests.reliability.fix_outcome import broken_invariants, outcome

CONVERSATIONS = 3  # 7 episodes each, 2 a chunk: 12 chunks, 4 a conversation
# a day apart, the last ones a minute ago: still open (the segmentation gap is 30 minutes)
START = datetime.now(UTC) - timedelta(days=6, minutes=1)


def _reset(db: Database) -> None:
    with db.connection() as conn:
        conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")


def _run_in_process(db: Database, home: Path, *, named: bool = False) -> None:
    settings = settings_for(db.url, home)
    conversations = pending_conversations(db) if named else None
    consolidate(
        db, CommandModel(), HashEmbedder(), settings, kind="backfill", conversations=conversations
    )


@pytest.fixture(scope="module")
def clean(database: Database, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What one uninterrupted run of the stories leaves."""
    _reset(database)
    with database.connection() as conn:
        load_episodes(conn, story_episodes(CONVERSATIONS, START))
    _run_in_process(database, tmp_path_factory.mktemp("clean"), named=True)
    with database.connection() as conn:
        assert broken_invariants(conn) == {}
        seen = outcome(conn)
    _reset(database)
    return seen


def test_an_unnamed_run_leaves_the_open_episodes_and_says_why(
    db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:
    load_episodes(conn, story_episodes(CONVERSATIONS, START))
    conn.commit()
    summary = consolidate(
        db, CommandModel(), HashEmbedder(), settings_for(db.url, tmp_path), kind="backfill"
    )
    assert summary.episodes_closed == 0
    assert summary.left_undone() == {"open": CONVERSATIONS}
    assert summary.episodes_consolidated == CONVERSATIONS * 6


def test_a_clean_run_of_the_stories_writes_every_kind_of_action(clean: Any) -> None:
    actions = {row[2] for row in clean["decisions"]}
    assert {"new", "reinforce", "update", "invalidate"} <= actions
    assert len(clean["chunks"]) == CONVERSATIONS * 4


@pytest.mark.parametrize("point", RUN_POINTS)
def test_a_run_killed_at_the_point_then_run_again_ends_as_a_clean_run(
    point: str, db: Database, conn: psycopg.Connection, clean: Any, tmp_path: Path
) -> None:
    load_episodes(conn, story_episodes(CONVERSATIONS, START))
    conn.commit()
    said = kill_at(db, tmp_path, point, hit_for(point))
    assert said == f"AT {point}", (tmp_path / "child.log").read_text()[-3000:]

    _run_in_process(db, tmp_path)

    assert broken_invariants(conn) == {}
    assert outcome(conn) == clean
    statuses = [
        r[0] for r in conn.execute("SELECT status FROM consolidation_runs ORDER BY started_at")
    ]
    assert statuses == ["crashed", "completed"]
