"""Servers slowwave starts as child processes (Prefect, llama.cpp, vLLM): on 127.0.0.1, each in
a session of its own behind a watchdog (``models.watchdog``) that ends it when the command
that started it ends, however that ends; stopped by pid with everything they started. Each
running helper has a record in its home's ``run/helpers``; a command finding the record of a
helper whose command is gone stops what is left of it and says so (``take_over``)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import psutil

from slowwave.models.errors import ServerError

log = logging.getLogger(__name__)


def helpers_of(home: Path) -> Path:
    """The folder of the records of ``home``'s running helpers (``take_over``)."""
    return home / "run" / "helpers"


def watched(args: Sequence[str]) -> list[str]:
    """``args`` run behind a watchdog that ends them when this process ends
    (``models.watchdog``)."""
    return [sys.executable, "-m", "slowwave.models.watchdog", str(os.getpid()), "--", *args]


def unwind_on_sigterm() -> None:
    """Make a SIGTERM (a cancelled job, a stopped service) unwind this process like Ctrl-C,
    through every ``finally``, so the servers it started stop with it; exit status 143. A
    process inherits the signals blocked where it was started, and a blocked SIGTERM would wait
    unseen, handler or not: it is unblocked. Only the main thread can set a signal handler:
    elsewhere this does nothing."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def run_in_foreground(args: Sequence[str], env: dict[str, str], grace_s: float = 20.0) -> int:
    """Run a long-lived command (a server, a worker) as this process's own foreground work:
    its exit status, or, when this process is interrupted (Ctrl-C, SIGTERM), the interrupt
    passed on to it as SIGINT, ``grace_s`` for it to stop as it does on Ctrl-C, then whatever
    it left stopped by pid; the interrupt is raised again. It runs in a session of its own,
    so that one Ctrl-C reaches it once, through this process."""
    process = subprocess.Popen(watched(args), env=env, start_new_session=True)
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


# The longest path an AF_UNIX socket may have (``sockaddr_un.sun_path`` less its closing NUL)
SOCKET_PATH_MAX = 107


@contextlib.contextmanager
def socket_folder(preferred: Path, name_len: int) -> Iterator[Path]:
    """A folder for a server's unix sockets, each named ``name_len`` bytes: ``preferred`` where
    such a path fits, else a private short folder (``tempfile.mkdtemp``, under ``/tmp`` where
    the temporary folder's own path is too deep) removed afterwards. A home deep in the file
    system must not stop a server from binding its sockets."""
    if len(os.fsencode(preferred)) + 1 + name_len <= SOCKET_PATH_MAX:
        preferred.mkdir(parents=True, exist_ok=True)
        yield preferred
        return
    prefix = "slowwave-sockets-"
    base = tempfile.gettempdir()
    # mkdtemp adds eight characters to the prefix
    if len(os.fsencode(base)) + len(prefix) + 10 + name_len > SOCKET_PATH_MAX:
        base = "/tmp"
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_in_own_group(
    args: Sequence[str], env: dict[str, str], log: Path, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start ``args`` in a new session (so a terminal's Ctrl-C is not theirs) behind a watchdog
    that ends them with this process (``watched``), output to ``log``; stop it with
    :func:`stop_process_tree`."""
    with log.open("wb") as out:
        return subprocess.Popen(
            watched(args),
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
    stuck = stop_pid_tree(process.pid, timeout_s)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    return stuck


def stop_pid_tree(
    pid: int, timeout_s: float = 30.0, first: signal.Signals = signal.SIGTERM
) -> list[int]:
    """``stop_process_tree`` of a process known by its pid (a child or not); ``first``: the
    signal sent before the SIGKILL (SIGKILL itself for a machine lost at once)."""
    try:
        leader = psutil.Process(pid)
        family = [leader, *leader.children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.send_signal(first)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, first)
    _, alive = psutil.wait_procs(family, timeout=timeout_s)
    for member in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    _, stuck = psutil.wait_procs(alive, timeout=5)
    return [member.pid for member in stuck]


def _started(pid: int) -> float | None:
    """When process ``pid`` started (to tell it from a later process given the same pid), or
    None when there is none."""
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def take_over(registry: Path) -> list[str]:
    """Clear the records in ``registry`` (a home's ``run/helpers``) of helpers whose command is
    gone: what still runs of such a helper (its watchdog was killed too, by the OOM killer
    say) is stopped by pid. Returns what was done, one phrase each; says so in one line."""
    done: list[str] = []
    for path in sorted(registry.glob("*.json")):
        try:
            record = json.loads(path.read_text())
            owner, helper = int(record["owner"]), int(record["pid"])
            what = str(record["what"])
            if _started(owner) == record["owner_started"]:
                continue  # a live command's: not ours to touch
        except FileNotFoundError:
            continue  # its command removed it meanwhile
        except (ValueError, KeyError, TypeError, OSError):
            path.unlink(missing_ok=True)
            done.append(f"removed an unreadable record {path.name}")
            continue
        if record["started"] is not None and _started(helper) == record["started"]:
            stop_pid_tree(helper, timeout_s=5.0)
            done.append(f"stopped {what} (pid {helper}) of a command that is gone (pid {owner})")
        else:
            done.append(f"removed the record of {what} (pid {helper}), no longer running")
        path.unlink(missing_ok=True)
    if done:
        log.warning("took over this home's helpers: %s", "; ".join(done))
    return done


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
        registry: Path | None = None,
    ) -> None:
        """``stop_grace_s``: how long a stop waits after SIGTERM before it kills (a server with
        nothing to save, like a model's, need not finish the answer it is generating);
        ``registry``: the folder of the records of a home's running helpers (``take_over``),
        by default the log's."""
        self.registry = registry or log.parent
        self.record: Path | None = None
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
        self.registry.mkdir(parents=True, exist_ok=True)
        take_over(self.registry)
        self.process = start_in_own_group(self.command, self.env, self.log)
        self.record = self._write_record(self.process.pid)
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
        left = stop_process_tree(process, self.stop_grace_s) if process is not None else []
        record, self.record = self.record, None
        if record is not None and not left:
            record.unlink(missing_ok=True)
        if left:
            raise ServerError(f"{self.what} processes {left} did not stop")

    def _write_record(self, pid: int) -> Path:
        """The record ``take_over`` reads: which helper, started when, for which command."""
        record = self.registry / f"{self.log.stem}-{pid}.json"
        record.write_text(
            json.dumps(
                {
                    "what": self.what,
                    "pid": pid,
                    "started": _started(pid),
                    "owner": os.getpid(),
                    "owner_started": _started(os.getpid()),
                    "command": self.command[:3],
                }
            )
        )
        return record

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
