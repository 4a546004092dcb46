"""The database connection dropped mid-apply, at COMMIT, and after a COMMIT whose
confirmation was lost, in the nightly flow: the shard is retried (or the outcome read back),
nothing is half applied, nothing is charged, and the end state is a clean run's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

from slowwave.models import faultpoints
from slowwave.models.embedding.base import Embedder
from slowwave.models.llm.replay import LoCoMoReplayModel
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.transcripts import ingest
from tests.fix_db import TABLES
from tests.reliability.fix_outcome import broken_invariants, outcome

CONVERSATION = "conv-30"  # 19 sessions: 3 chunks


def ingest_one(db: Database, settings: Settings, locomo_one_path: Path) -> None:
    """The conversation under test ingested, alone."""
    ingest(db, locomo_one_path, IngestPolicy.of(settings))


def terminate(db: Database) -> Callable[[str, Any], None]:
    """The fault: the server ends the backend of the connection apply is using."""

    def drop(point: str, conn: Any) -> None:
        with db.raw_connection(autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))

    return drop


def lose_confirmation(point: str, conn: Any) -> None:
    """The COMMIT landed, but its answer never reached slowwave."""
    conn.close()
    raise psycopg.OperationalError("server closed the connection unexpectedly")


# the clean run's outcome, made once: the replay model answers the same every time
_CLEAN: list[Any] = []


@pytest.fixture
def clean(
    db: Database, flow_settings: Settings, locomo_one_path: Path, embedder: Embedder
) -> Iterator[Any]:
    """What one undisturbed run makes of the conversation."""
    if not _CLEAN:
        ingest_one(db, flow_settings, locomo_one_path)
        consolidate(
            db,
            LoCoMoReplayModel(locomo_one_path),
            embedder,
            flow_settings,
            conversations=[CONVERSATION],
        )
        with db.connection() as conn:
            _CLEAN.append(outcome(conn))
            conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
    yield _CLEAN[0]


def shard_runs(flow_run_id: Any) -> list[int]:
    """How many times each shard task of the flow run ran."""
    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    return [r.run_count for r in runs if r.name.startswith("consolidate shard")]


@pytest.mark.parametrize(
    ("point", "fault", "retried"),
    [
        ("apply.insert_facts.after", "drop", True),
        ("commit.before", "drop", True),
        ("commit.after", "lost confirmation", False),
    ],
)
@pytest.mark.slow
def test_a_connection_lost_while_applying_ends_as_a_clean_run(
    prefect_api: None,
    db: Database,
    conn: psycopg.Connection,
    flow_settings: Settings,
    locomo_one_path: Path,
    clean: Any,
    point: str,
    fault: str,
    retried: bool,
) -> None:
    from slowwave.flows.consolidate import nightly

    ingest_one(db, flow_settings, locomo_one_path)
    faultpoints.arm(point, terminate(db) if fault == "drop" else lose_confirmation, at_hit=2)
    try:
        state = nightly(conversations=[CONVERSATION], return_state=True)
    finally:
        faultpoints.disarm()
    assert state.is_completed(), state.message
    summary = state.result()
    assert summary["chunks_failed"] == 0 and summary["episodes_consolidated"] == 19

    assert broken_invariants(conn) == {}
    assert outcome(conn) == clean  # no chunk applied twice, none half
    (charged,) = conn.execute("SELECT count(*) FROM episodic_memory WHERE attempts > 0").fetchone()  # type: ignore[misc]
    assert charged == 0
    runs = shard_runs(state.state_details.flow_run_id)
    assert runs and (max(runs) == 2) is retried, runs
