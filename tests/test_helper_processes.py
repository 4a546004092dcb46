"""Every helper a slowwave command starts ends when the command ends, however it ends: the
temporary Prefect API and llama.cpp's server behind a watchdog (``models.watchdog``), the
embedded Postgres (shared by design) by its warden once no live process holds it. The command
is killed with SIGKILL alone, then with its process group; within seconds nothing it started
is alive, and the next command on the same home runs and says what it took over."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from slowwave.models.processes import free_port, helpers_of, take_over
from slowwave.sql.db.embedded import postmaster_pid
from tests.fix_model_server import FakeModel, fake_model
from tests.fix_processes import gone_pid, run_cli, slowwave_env
from tests.test_llamacpp_runtime import GGUF, _require_llamacpp

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "transcripts" / "sample-chats.jsonl"
GONE_WITHIN_S = 15.0  # a watchdog looks 4 times a second; Prefect's API takes a few to stop

KILLS: dict[str, Callable[[int], None]] = {
    "the command alone": lambda pid: os.kill(pid, signal.SIGKILL),
    "its process group": lambda pid: os.killpg(pid, signal.SIGKILL),
}


def started_by(pid: int, home: Path) -> list[psutil.Process]:
    """What ``pid`` started and is still running (in other sessions too), and the embedded
    Postgres of ``home`` (pg_ctl leaves it to init)."""
    family = psutil.Process(pid).children(recursive=True)
    postmaster = postmaster_pid(home / "pgdata")
    return family + ([psutil.Process(postmaster)] if postmaster else [])


def still_alive(processes: list[psutil.Process], within_s: float = GONE_WITHIN_S) -> list[str]:
    """Those of ``processes`` still running after ``within_s`` (none, as it should be)."""
    deadline = time.monotonic() + within_s
    alive = processes
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    return [" ".join(p.cmdline()[:6]) for p in alive if p.is_running()]


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "slowwave", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a group of its own: the operator's kill -- -PID
        )


@contextlib.contextmanager
def stopped_at_last(child: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    try:
        yield child
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)


def _backfill_env(home: Path, model: FakeModel) -> dict[str, str]:
    env = slowwave_env(home, **model.env(), SLOWWAVE_PREFECT_PORT=str(free_port()))
    env.pop("PREFECT_API_URL", None)  # no API given: the command starts its own
    return env


@pytest.mark.slow
def test_a_killed_backfill_leaves_no_prefect_api_nor_postgres_and_the_next_one_runs(
    tmp_path: Path,
) -> None:
    args = ["backfill", str(SAMPLE), "--conversation", "dana"]
    for how, kill in KILLS.items():
        hold = threading.Event()
        with fake_model(hold=hold) as model:
            child = _start(args, _backfill_env(tmp_path, model), tmp_path / "killed.log")
            with stopped_at_last(child):
                while not model.held.wait(0.5):  # the flow is asking the model
                    assert child.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
                helpers = started_by(child.pid, tmp_path)
                shown = [" ".join(p.cmdline()) for p in helpers]
                assert any("prefect server start" in c for c in shown), shown
                assert any("postgres" in c for c in shown), shown
                kill(child.pid)
                child.wait(30)
                assert still_alive(helpers) == [], f"left running after a SIGKILL of {how}"
            assert postmaster_pid(tmp_path / "pgdata") is None

    with fake_model() as model:
        after = run_cli(tmp_path, *args, **_backfill_env(tmp_path, model))
    assert after.returncode == 0, after.stderr[-3000:]
    took_over = [line for line in after.stderr.splitlines() if "took over" in line]
    assert len(took_over) == 1 and "the temporary Prefect API" in took_over[0], after.stderr
    assert list(helpers_of(tmp_path).glob("*.json")) == []  # its own record removed at its end


@pytest.mark.slow
@pytest.mark.parametrize("how", KILLS)
def test_a_killed_models_serve_leaves_no_llamacpp_server_running(tmp_path: Path, how: str) -> None:
    _require_llamacpp()
    port = free_port()
    env = slowwave_env(tmp_path, SLOWWAVE_LLM_MODEL=str(GGUF), SLOWWAVE_LLM_MAX_MODEL_LEN="2048")
    args = ["models", "serve", "--engine", "llamacpp", "--port", str(port)]
    with stopped_at_last(_start(args, env, tmp_path / "serve.log")) as child:
        deadline = time.monotonic() + 180
        while not _answers(f"http://127.0.0.1:{port}/v1/models"):
            assert child.poll() is None and time.monotonic() < deadline, (
                tmp_path / "serve.log"
            ).read_text()[-3000:]
            time.sleep(0.5)
        helpers = started_by(child.pid, tmp_path)
        assert any("llama" in " ".join(p.cmdline()) for p in helpers)
        KILLS[how](child.pid)
        child.wait(30)
        assert still_alive(helpers) == []
    assert not _answers(f"http://127.0.0.1:{port}/v1/models")


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def test_the_next_command_stops_a_helper_whose_command_and_watchdog_are_gone(
    tmp_path: Path,
) -> None:
    """Where the watchdog was killed too (the OOM killer may take both), the record in the
    home's ``run/helpers`` lets the next command stop what is left and say so; a live
    command's helper is left alone."""
    registry = helpers_of(tmp_path)
    registry.mkdir(parents=True)
    orphan = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
    )
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        owner = gone_pid()

        def record(name: str, pid: int, owner: int, owner_started: float) -> None:
            started = psutil.Process(pid).create_time() if psutil.pid_exists(pid) else 1.0
            (registry / name).write_text(
                json.dumps(
                    {"what": "a test helper", "pid": pid, "started": started,
                     "owner": owner, "owner_started": owner_started}
                )
            )  # fmt: skip

        record("orphan.json", orphan.pid, owner, 1.0)
        record("reused.json", gone_pid(), owner, 1.0)  # its pid may be anyone's by now
        record("mine.json", live.pid, os.getpid(), psutil.Process().create_time())
        (registry / "torn.json").write_text('{"what": ')

        done = take_over(registry)

        orphan.wait(10)  # stopped: this test's own child, reaped here or by take_over
        assert live.poll() is None
        assert sorted(p.name for p in registry.iterdir()) == ["mine.json"]
        assert len(done) == 3 and f"stopped a test helper (pid {orphan.pid})" in done[0]
    finally:
        for process in (orphan, live):
            process.kill()
            process.wait()
