"""Running the crash child (``tests.reliability.crash_child``) from a test or a benchmark."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from slowwave.models.processes import free_port
from slowwave.sql.db import Database

ROOT = Path(__file__).resolve().parents[2]


def hit_for(point: str) -> int:
    """Which time the point is reached when the child dies there: mid-run where it can be."""
    if point.startswith(("claim.", "close.")):
        return 1  # one close and one claim a run
    if point == "model.answered":
        return 2  # once a batch of chunks
    return 3  # once a batch (a chain step: a chunk of each conversation): half applied


def child_command(db: Database, home: Path, point: str, hit: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tests.reliability.crash_child",
        db.url,
        str(home),
        point,
        str(hit),
        *extra,
    ]


def kill_at(db: Database, home: Path, point: str, hit: int) -> str:
    """Run the child until it reaches ``point``, SIGKILL its process group, return what it
    printed."""
    return _kill(db, home, point, hit, helpers=False)[0]


def kill_with_helpers_at(db: Database, home: Path, point: str, hit: int) -> tuple[str, int, int]:
    """``kill_at`` of a child that runs behind a temporary Prefect API of its own, as `slowwave
    backfill` does where no `slowwave server` runs; also how many processes it had started
    and how many of them are still alive ``HELPERS_GONE_S`` after the kill (0, as it must
    be)."""
    return _kill(db, home, point, hit, helpers=True)


HELPERS_GONE_S = 15.0


def _kill(db: Database, home: Path, point: str, hit: int, *, helpers: bool) -> tuple[str, int, int]:
    env = dict(os.environ)
    if helpers:
        env.pop("PREFECT_API_URL", None)
        env.update(SLOWWAVE_CRASH_HELPERS="1", SLOWWAVE_PREFECT_PORT=str(free_port()))
    child = subprocess.Popen(
        child_command(db, home, point, hit),
        stdout=subprocess.PIPE,
        stderr=(home / "child.log").open("w"),
        text=True,
        start_new_session=True,
        cwd=ROOT,
        env=env,
    )
    started: list[psutil.Process] = []
    try:
        assert child.stdout is not None  # stdout=PIPE
        ready, _, _ = select.select([child.stdout], [], [], 180 if helpers else 120)
        line = child.stdout.readline().strip() if ready and child.stdout else "(no answer)"
        started = psutil.Process(child.pid).children(recursive=True)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    deadline = time.monotonic() + HELPERS_GONE_S
    while (alive := [p for p in started if _running(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return line, len(started), len(alive)


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def run_at_once(db: Database, home: Path, runs: int, conversations_each: int) -> list[str]:
    """``runs`` children that claim at the same moment (a barrier), each up to
    ``conversations_each`` conversations; their output, once all have ended."""
    children = [
        subprocess.Popen(
            child_command(db, home, "barrier", runs, str(conversations_each)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
        )
        for _ in range(runs)
    ]
    outputs = [c.communicate(timeout=600)[0] for c in children]
    failed = [o for c, o in zip(children, outputs, strict=True) if c.returncode != 0]
    if failed:
        raise AssertionError(f"{len(failed)} of {runs} runs failed: {failed[0][-2000:]}")
    return outputs
