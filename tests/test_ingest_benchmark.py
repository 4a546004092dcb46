"""The ingest benchmark, sized for CI: every path ingests the same messages, each in a process
of its own, and the last line holds the figures the README quotes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.ingest import FIRST_SIZE_KEYS, PATHS
from tests.fix_processes import slowwave_env

ROOT = Path(__file__).resolve().parents[1]


def test_the_ingest_benchmark_runs_every_path_on_the_same_messages_at_two_sizes(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.ingest", "--sizes", "3000,6000", "--json"],
        cwd=ROOT,
        env=slowwave_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    for key in (*FIRST_SIZE_KEYS, "driver_peak_rss_ratio"):
        assert figures[key] > 0, key
    for size in (3000, 6000):
        ingested = figures["by_size"][str(size)]["ingested_by_path"]
        assert ingested == dict.fromkeys(PATHS, size)
