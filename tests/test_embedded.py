"""The embedded server's lifetime: stopped by its last holder, or within seconds by its warden
when the last holder was killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slowwave.sql.db.embedded import postmaster_pid, stop_embedded, warden_pid
from slowwave.sql.db.warden import POLL_S as WARDEN_POLL_S
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


def _hold(home: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER], env=slowwave_env(home), stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip(), "holder did not start the embedded server"
    return proc, int(line)


@pytest.mark.slow
def test_the_server_stops_within_seconds_of_its_last_holder_killed_with_sigkill(
    tmp_path: Path, holder: tuple[subprocess.Popen[str], int]
) -> None:
    proc, pid = holder
    second, joined = _hold(tmp_path)
    try:
        assert joined == pid  # one server, two holders
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(3 * WARDEN_POLL_S)
        assert postmaster_pid(tmp_path / "pgdata") == pid, "stopped under a live holder"

        warden = warden_pid(tmp_path / "pgdata")
        assert warden is not None
        os.kill(second.pid, signal.SIGKILL)
        second.wait()
        assert wait_gone(pid), "the server outlives its last holder"
        assert wait_gone(warden)  # and its warden, its work done
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()

    status = run_cli(tmp_path, "db", "status")  # the next command starts it again
    assert status.returncode == 0, status.stderr


@pytest.mark.slow
def test_db_stop_stops_a_server_left_behind_by_a_killed_process(
    tmp_path: Path, holder: tuple[subprocess.Popen[str], int]
) -> None:
    proc, pid = holder
    warden = warden_pid(tmp_path / "pgdata")
    assert warden is not None
    os.kill(warden, signal.SIGKILL)  # the OOM killer may take both
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
