"""A consolidating process for the crash tests: arms one fault point to stop there, then runs
a backfill-style consolidation of what the database holds.

    python -m tests.reliability.crash_child DATABASE_URL HOME POINT HIT [MAX_CONVERSATIONS]

At the point it prints ``AT POINT`` and waits to be killed: the test SIGKILLs its process
group at that exact moment. ``DONE`` means the run ended without reaching the point. POINT
``none`` arms nothing; ``barrier`` waits, before claiming, until HIT runs are running: the
concurrency tests start several of these and make them claim at the same moment.

Except at a barrier, the run names every conversation with pending episodes, as a run asked
for explicitly does: it closes their open episodes first (the fault point ``close.after``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import psycopg

from slowwave.models import faultpoints
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from tests.reliability.fix_commands import CommandModel, HashEmbedder

CHUNK_SIZE = 2


def settings_for(url: str, home: Path, max_conversations: int = 10_000) -> Settings:
    return Settings(
        database_url=url,
        home=home,
        chunk_size=CHUNK_SIZE,
        chunk_min_tokens=0,  # the scenarios count chunks of CHUNK_SIZE
        chunk_lone_joins=False,
        claim_max_conversations=max_conversations,
        _env_file=None,
    )


def wait_here(point: str, conn: Any) -> None:
    print(f"AT {point}", flush=True)
    time.sleep(600)


def wait_for_runs(url: str, runs: int, timeout_s: float = 60.0) -> None:
    """Until ``runs`` runs have started (each waits here before it claims; one that is let
    through may finish before the last one looks)."""
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT count(*) FROM consolidation_runs").fetchone()
            if row and row[0] >= runs:
                return
            time.sleep(0.05)
    raise TimeoutError(f"fewer than {runs} runs started within {timeout_s} s")


def main() -> None:
    url, home, point, hit = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    settings = settings_for(url, home, *(int(a) for a in sys.argv[5:6]))
    if point == "barrier":
        faultpoints.arm("claim.before", lambda p, conn: wait_for_runs(url, hit))
    elif point != "none":
        faultpoints.arm(point, wait_here, at_hit=hit)
    with helpers(settings), Database(settings) as db:
        named = None if point == "barrier" else pending_conversations(db)
        consolidate(
            db, CommandModel(), HashEmbedder(), settings, kind="backfill", conversations=named
        )
    print("DONE", flush=True)


def helpers(settings: Settings) -> AbstractContextManager[object]:
    """With ``SLOWWAVE_CRASH_HELPERS=1``, a temporary Prefect API of the run's own (what
    `slowwave backfill` starts where no `slowwave server` runs): a helper its kill must end."""
    if os.environ.get("SLOWWAVE_CRASH_HELPERS") != "1":
        return contextlib.nullcontext()
    from slowwave.cli.prefect import flow_api

    return flow_api(settings)


def pending_conversations(db: Database) -> list[str]:
    """The conversations with pending episodes, as a run that names them all takes them."""
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT DISTINCT conversation_id FROM episodic_memory "
            "WHERE consolidated_at IS NULL AND quarantined_at IS NULL ORDER BY 1"
        ).fetchall()
    return [r[0] for r in rows]


if __name__ == "__main__":
    main()
