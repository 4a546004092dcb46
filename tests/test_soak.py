"""The soak, sized for CI (`python -m benchmarks.soak` runs it at full size): a minute of
mixed search and record load from 16 clients over two replicas, one killed with SIGKILL
midway, while a consolidation runs on the same database."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from benchmarks.soak import run_soak

pytestmark = pytest.mark.slow


def test_load_on_two_replicas_while_a_run_consolidates_loses_nothing_and_changes_no_fact(
    locomo_path: Path,
) -> None:
    figures = run_soak(locomo_path, seconds=60, clients=16, pending=1)

    assert figures["searches"] > 100 and figures["records"] > 100, figures
    assert figures["no_5xx"], "\n".join(figures["failures"] + figures["replica_errors"])
    assert figures["replicas_failed"] == 1, figures  # the one killed; the other kept serving
    assert figures["stored_exactly_once"], figures
    assert figures["consolidation_status"] == "completed", figures
    assert figures["facts_expected"] > 0 and figures["facts_equal_without_load"], figures
    # the Postgres of its homes went with them, the killed replica's holding notwithstanding
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if _soak_postgres(p)]
    assert not left, f"the soak left its Postgres running: {left}"


def _soak_postgres(process: psutil.Process) -> bool:
    command = " ".join(process.info["cmdline"] or [])
    return "postgres" in command and "slowwave-soak-" in command
