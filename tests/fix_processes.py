"""Helpers for tests that run slowwave in other processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def slowwave_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("DATABASE_URL")}
    env["SLOWWAVE_HOME"] = str(home)
    env.update(extra)
    return env


def run_cli(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run ``slowwave ARGS`` as a user would, with its own home."""
    return subprocess.run(
        [sys.executable, "-m", "slowwave", *args],
        env=slowwave_env(home, **extra),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def stop_db(home: Path) -> None:
    """Stop ``home``'s embedded Postgres at a fixture's end, as a user would, without
    ``--force``: a handle the test process left open still holds it, and fails here."""
    stopped = run_cli(home, "db", "stop")
    assert stopped.returncode == 0, stopped.stderr


def api_backfill(home: Path, source: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """``slowwave.backfill(SOURCE)`` in a process of its own, with its own home: what `slowwave
    backfill` leaves (tests/test_backfill_parity.py), through the Python API; it prints the
    run's status."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            f"import slowwave; print(slowwave.backfill({str(source)!r}).status)",
        ],
        env=slowwave_env(home, **extra),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def gone_pid() -> int:
    """The pid of a process that has exited: what a killed run leaves in its row."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(child.stdout)
