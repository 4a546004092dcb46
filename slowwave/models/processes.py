"""Servers slowwave starts as child processes (Prefect, vLLM): on 127.0.0.1, each in a process
group of its own, and stopped by pid with everything they started."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import psutil

from slowwave.models.errors import ServerError


def unwind_on_sigterm() -> None:
    """Make a SIGTERM (a cancelled job, a stopped service) unwind this process like Ctrl-C,
    through every ``finally``, so the servers it started stop with it; exit status 143. Only
    the main thread can set a signal handler: elsewhere this does nothing."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_on_sigterm)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def run_in_foreground(args: Sequence[str], env: dict[str, str], grace_s: float = 20.0) -> int:
    """Run a long-lived command (a server, a worker) as this process's own foreground work:
    its exit status, or, when this process is interrupted (Ctrl-C, SIGTERM), the interrupt
    passed on to it as SIGINT, ``grace_s`` for it to stop as it does on Ctrl-C, then whatever
    it left stopped by pid; the interrupt is raised again. It runs in a session of its own,
    so that one Ctrl-C reaches it once, through this process."""
    process = subprocess.Popen(list(args), env=env, start_new_session=True)
    try:
        return process.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace_s)
        stop_process_tree(process, timeout_s=5.0)
        raise


def answers(url: str) -> bool:
    """Whether a server on 127.0.0.1 answers ``url`` (a health endpoint) with 200."""
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False


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


class LocalServer:
    """A server child process on 127.0.0.1: started, waited on until ``health_url`` answers
    200, stopped by pid with everything it started. Use it as a context manager or call
    ``start`` and ``stop``."""

    def __init__(
        self,
        what: str,
        command: Sequence[str],
        env: dict[str, str],
        log: Path,
        health_url: str,
        startup_timeout_s: float,
        stop_grace_s: float = 30.0,
    ) -> None:
        """``stop_grace_s``: how long a stop waits after SIGTERM before it kills (a server with
        nothing to save, like a model's, need not finish the answer it is generating)."""
        self.what = what
        self.stop_grace_s = stop_grace_s
        self.command = list(command)
        self.env = env
        self.log = log
        self.health_url = health_url
        self.startup_timeout_s = startup_timeout_s
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start and wait until healthy; stopped again if anything interrupts the wait (a
        Ctrl-C during a model load included): a server of its own session outlives its
        parent otherwise."""
        self.process = start_in_own_group(self.command, self.env, self.log)
        deadline = time.monotonic() + self.startup_timeout_s
        try:
            # exited first: something else on the port must not pass for this server
            while self.process.poll() is None and not self._healthy():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            if self.process.poll() is not None or not self._healthy():
                tail = self.log.read_text(errors="replace")[-3000:]
                raise ServerError(f"{self.what} did not start (log {self.log}):\n{tail}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and (left := stop_process_tree(process, self.stop_grace_s)):
            raise ServerError(f"{self.what} processes {left} did not stop")

    def _healthy(self) -> bool:
        return answers(self.health_url)

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        except ServerError:
            if exc[0] is None:  # a failure inside the block is not masked by this one
                raise
