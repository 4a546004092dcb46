"""Servers slowwave starts as child processes (Prefect, vLLM): on 127.0.0.1, each in a process
group of its own, and stopped by pid with everything they started."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

import psutil


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_in_own_group(
    args: Sequence[str], env: dict[str, str], log: Path, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start ``args`` in a new session (so a terminal's Ctrl-C is not theirs), output to
    ``log``; stop it with :func:`stop_process_tree`."""
    with log.open("wb") as out:
        return subprocess.Popen(
            list(args),
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_process_tree(process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> list[int]:
    """SIGTERM to the process, its descendants (a child may have started a session of its own)
    and its group; SIGKILL to whatever is still there after ``timeout_s``. Returns the pids
    that survived even that (none, normally)."""
    try:
        leader = psutil.Process(process.pid)
        family = [leader, *leader.children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.send_signal(signal.SIGTERM)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    _, alive = psutil.wait_procs(family, timeout=timeout_s)
    for member in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    _, stuck = psutil.wait_procs(alive, timeout=5)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    return [member.pid for member in stuck]
