"""The embedded server's lifetime: stopped by its last holder, even after a SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from slowwave.sql.db.embedded import postmaster_pid, stop_embedded
from tests.fix_db import wait_gone
from tests.fix_processes import run_cli, slowwave_env

HOLDER = """
import sys, time
from slowwave.sql.db import Database
with Database() as db:
    print(db.embedded.pid, flush=True)
    time.sleep(120)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A process holding the embedded server of ``tmp_path``; yields it and the postmaster pid."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        env=slowwave_env(tmp_path),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip(), "holder did not start the embedded server"
    pid = int(line)
    try:
        yield proc, pid
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if postmaster_pid(tmp_path / "pgdata") is not None:
            stop_embedded(tmp_path / "pgdata", force=True)
        assert wait_gone(pid)


@pytest.mark.slow
def test_a_holder_killed_with_sigkill_does_not_leave_the_server_running_forever(
    tmp_path: Path, holder: tuple[subprocess.Popen[str], int]
) -> None:
    proc, pid = holder
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert postmaster_pid(tmp_path / "pgdata") == pid, "the server outlives its killed holder"

    status = run_cli(tmp_path, "db", "status")  # joins, prunes the dead holder, stops at exit
    assert status.returncode == 0, status.stderr
    assert wait_gone(pid)


@pytest.mark.slow
def test_db_stop_stops_a_server_left_behind_by_a_killed_process(
    tmp_path: Path, holder: tuple[subprocess.Popen[str], int]
) -> None:
    proc, pid = holder
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    result = run_cli(tmp_path, "db", "stop")
    assert result.returncode == 0, result.stderr
    assert "stopped the embedded Postgres" in result.stdout
    assert wait_gone(pid)


@pytest.mark.slow
def test_db_stop_refuses_while_a_live_process_holds_the_server(
    tmp_path: Path, holder: tuple[subprocess.Popen[str], int]
) -> None:
    proc, pid = holder
    result = run_cli(tmp_path, "db", "stop")
    assert result.returncode == 1
    assert f"in use by pid(s) [{proc.pid}]" in result.stderr
    assert postmaster_pid(tmp_path / "pgdata") == pid
