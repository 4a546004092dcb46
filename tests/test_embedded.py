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

import psutil
import pytest

from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.sql.db.embedded import (
    holders_locked,
    postmaster_pid,
    stop_embedded,
    stop_embedded_locked,
    warden_pid,
)
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


@pytest.mark.slow
def test_db_stop_waits_for_a_warden_stopping_the_server_and_reports_none_left(
    tmp_path: Path, holder: tuple[subprocess.Popen[str], int]
) -> None:
    """The warden stops a server under the lock holders join by; `db stop` at that moment must
    wait for it and find nothing to stop, not send its own stop to a server already going."""
    proc, _ = holder
    pgdata = tmp_path / "pgdata"
    with holders_locked(pgdata):  # as the warden holds it while it stops the server
        stop = subprocess.Popen(
            [sys.executable, "-m", "slowwave", "db", "stop", "--force"],
            env=slowwave_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            with pytest.raises(subprocess.TimeoutExpired):
                stop.wait(5)  # a command starts in under 2 s here; this one waits on the lock
            proc.kill()
            proc.wait()
            assert stop_embedded_locked(pgdata, force=True)
        finally:
            if stop.poll() is None and postmaster_pid(pgdata) is not None:
                stop.kill()
    out, err = stop.communicate(timeout=60)
    assert stop.returncode == 0, err
    assert "no embedded Postgres running" in out


REJOINER = """
import sys
from slowwave.sql.db import Database
with Database() as db, db.connection() as conn:
    conn.execute("SELECT 1")
print("released", flush=True)  # another process held it too: pgserver keeps its handle cached
sys.stdin.readline()
with Database() as db, db.connection() as conn:
    print(conn.execute("SELECT 41 + 1").fetchone()[0], flush=True)
"""


@pytest.mark.slow
def test_a_process_that_let_go_joins_again_after_the_server_stopped(
    tmp_path: Path, holder: tuple[subprocess.Popen[str], int]
) -> None:
    """pgserver hands a process that let go while others held the server its cached handle,
    without starting the server or counting the process as a holder: once the last holder is
    gone and the warden stopped it, that process must start it and hold it again."""
    proc, pid = holder
    again = subprocess.Popen(
        [sys.executable, "-c", REJOINER],
        env=slowwave_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert again.stdin is not None and again.stdout is not None
    try:
        assert again.stdout.readline().strip() == "released"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert wait_gone(pid), "the warden did not stop the server of no live holder"
        again.stdin.write("go on\n")
        again.stdin.flush()
        assert again.stdout.readline().strip() == "42"
        assert again.wait(60) == 0
    finally:
        if again.poll() is None:
            again.kill()
            again.wait()


def test_the_last_holder_letting_go_ends_the_warden_before_it_returns(tmp_path: Path) -> None:
    """A benchmark removes its temporary home as soon as its database closes: nothing may
    write there afterwards, so the last holder ends the warden rather than leave it to notice."""
    home = tmp_path / "home"
    settings = Settings(home=home, database_url=None)
    pgdata = settings.pgdata
    with Database(settings):
        warden = warden_pid(pgdata)
        assert warden is not None
    assert postmaster_pid(pgdata) is None
    assert not psutil.pid_exists(warden) or psutil.Process(warden).status() == "zombie"
    assert not (pgdata.parent / f".{pgdata.name}.warden").exists()
