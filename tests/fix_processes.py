"""Helpers for tests that run slowwave in other processes."""

from __future__ import annotations

import contextlib
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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_background(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``args`` in a process group of its own, output to ``log``, to be stopped by
    :func:`stop_background`."""
    with log.open("wb") as out:
        return subprocess.Popen(
            args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop_background(process: subprocess.Popen[bytes], timeout: float = 30.0) -> list[int]:
    """Stop a process started by :func:`start_background` and everything it started: SIGTERM
    to its group and its descendants (a flow run may start a session of its own), SIGKILL to
    what is still there after ``timeout``. Returns the pids that would not go."""
    import signal

    import psutil

    try:
        family = [psutil.Process(process.pid), *psutil.Process(process.pid).children(True)]
    except psutil.NoSuchProcess:
        family = []
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.send_signal(signal.SIGTERM)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    _, alive = psutil.wait_procs(family, timeout=timeout)
    for member in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    _, stuck = psutil.wait_procs(alive, timeout=5)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    return [member.pid for member in stuck]
