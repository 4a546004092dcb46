"""Helpers for tests that run slowwave in other processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from slowwave.models.embedding.export import link_export
from slowwave.models.settings.runtimes import EmbeddingSettings

EMBEDDING = str(EmbeddingSettings.model_fields["model"].default)


# the repository's ONNX export of the embedding package, made by `.ci/run`'s `slowwave models
# setup` (``models.embedding.export``)
PREPARED_EMBEDDER = Path(__file__).resolve().parents[1] / ".slowwave" / "models" / EMBEDDING


def with_prepared_embedder(home: Path) -> Path:
    """``home`` with the repository's export of the embedding package linked in, where
    `slowwave models setup` would have made it: the ``auto`` runtime of every process the test
    starts loads it instead of torch (about 11 s a process on two cores), with the same
    vectors. Where none was made, the home goes without (sentence-transformers)."""
    link_export(PREPARED_EMBEDDER, home)
    return home


def slowwave_env(home: Path, **extra: str) -> dict[str, str]:
    with_prepared_embedder(home)
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
