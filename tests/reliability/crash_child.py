"""A consolidating process for the crash tests: arms one fault point to stop there, then runs
a backfill-style consolidation of what the database holds.

    python -m tests.reliability.crash_child DATABASE_URL HOME POINT HIT

At the point it prints ``AT POINT`` and waits to be killed: the test SIGKILLs its process
group at that exact moment. ``DONE`` means the run ended without reaching the point.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from models import faultpoints
from models.settings import Settings
from sql.db import Database
from tasks.consolidate import consolidate
from tests.reliability.fix_commands import CommandModel, HashEmbedder

CHUNK_SIZE = 2


def settings_for(url: str, home: Path) -> Settings:
    return Settings(database_url=url, home=home, chunk_size=CHUNK_SIZE, _env_file=None)  # type: ignore[call-arg]


def wait_here(point: str, conn: Any) -> None:
    print(f"AT {point}", flush=True)
    time.sleep(600)


def main() -> None:
    url, home, point, hit = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    faultpoints.arm(point, wait_here, at_hit=hit)
    settings = settings_for(url, home)
    with Database(settings) as db:
        consolidate(db, CommandModel(), HashEmbedder(), settings, kind="backfill")
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
