"""The watchdog between a slowwave command and a helper server it starts (the temporary
Prefect API, llama.cpp's server, vLLM's): the helper ends when the command ends, however it
ends.

A helper runs in a session of its own, so that a terminal's Ctrl-C reaches it once, through
the command, and the command can record how a run ended before the API stops. Cleanup code
does not run when the command is killed with SIGKILL (by hand, by the OOM killer), and the
helper's own session is not reached by a kill of the command's process group: three temporary
Prefect APIs of killed backfills were found running 20 minutes later, parent gone. So the
command starts this watchdog instead, in the new session; the watchdog starts the helper in
its own process group and

- polls its parent: once it is gone (the watchdog was handed to another parent), the group
  gets SIGTERM, then SIGKILL after ``GRACE_S``, and the watchdog exits;
- passes SIGTERM and SIGINT on to the helper and exits with the helper's status, so a stop
  by the command (``processes.stop_process_tree``) works as before;
- on Linux, has the kernel send SIGKILL to the helper if the watchdog itself dies
  (``PR_SET_PDEATHSIG``; the watchdog has one thread, so the signal cannot come early from a
  thread of it ending, as it could in the command).

Its parent is polled rather than signalled for the same reason: the command may start a
helper from a worker thread that ends long before the command does. It imports nothing but
the standard library (it starts in a few tens of milliseconds and holds a few MB).

Usage: ``python -m slowwave.models.watchdog PARENT_PID -- COMMAND [ARG ...]``
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

POLL_S = 0.25  # how often the parent is looked for
GRACE_S = 5.0  # how long a helper has after SIGTERM when its command is gone
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _stop_group(grace_s: float) -> None:
    """SIGTERM to every other process of this process group, SIGKILL to what is left after
    ``grace_s``. Where the group's members cannot be listed (no /proc), the group as a whole
    gets SIGTERM, this process ignoring it."""
    group = os.getpgrp()
    members = _group_members(group)
    if members is None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGTERM)
        return
    _signal(members, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _group_members(group):
        time.sleep(0.1)
        _reap()
    _signal(_group_members(group) or [], signal.SIGKILL)
    _reap()


def _signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _group_members(group: int) -> list[int] | None:
    """The live processes of ``group`` but this one; None where they cannot be listed (no
    /proc)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    me, members = os.getpid(), []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != b"Z":
            members.append(int(entry))
    return members


def watch(parent: int, command: Sequence[str]) -> int:
    """Run ``command`` until it exits (its status) or ``parent`` is gone (its group stopped,
    status 1)."""
    if os.getppid() != parent:
        return 1  # the command died before the helper was even started
    helper = subprocess.Popen(
        list(command), preexec_fn=_die_with_parent if sys.platform == "linux" else None
    )

    def pass_on(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            helper.send_signal(signum)

    signal.signal(signal.SIGTERM, pass_on)
    signal.signal(signal.SIGINT, pass_on)
    while True:
        try:
            status = helper.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            if os.getppid() != parent:
                _stop_group(GRACE_S)
                return 1
            continue
        if _group_members(os.getpgrp()) != []:  # what the helper started and left behind
            _stop_group(GRACE_S)
        return status if status >= 0 else 128 - status


def main(argv: Sequence[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print(__doc__.rsplit("Usage: ", 1)[1].strip(), file=sys.stderr)
        return 2
    return watch(int(argv[0]), argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
