"""An operator's interrupt (Ctrl-C, SIGINT; SIGTERM from a stopped service): one flag that all
work in flight watches.

The first signal prints ``interrupting…``, sets the flag and raises ``KeyboardInterrupt`` in
the main thread (a SIGTERM raises ``SystemExit(143)``). Work on other threads (a flow's shards)
sees the flag within ``POLL_S``: the chains (``tasks.chains``) withdraw every conversation the
way a forget withdraws one — its queued chunks dropped, its model request cancelled, nothing
more applied — and raise ``Interrupted``. The run then releases its claims and is recorded
as ``interrupted`` (``tasks.runs``), the servers this process started stop, and the command
exits 130. A second Ctrl-C while that happens exits at once, also 130, as Prefect's and the
GitHub CLI's commands do.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# How often waiting work looks at the flag: the longest an interrupt waits for a model call.
POLL_S = 0.2

_requested = threading.Event()


class Interrupted(KeyboardInterrupt):
    """Raised by work that saw the interrupt flag: a ``KeyboardInterrupt``, so every layer
    treats it as it treats Ctrl-C (no retry, no chunk charged, the run recorded as
    interrupted)."""

    def __init__(self, message: str = "interrupted by the operator") -> None:
        super().__init__(message)


def requested() -> bool:
    return _requested.is_set()


def request() -> None:
    """Ask all work in flight to stop (what the signal handlers do)."""
    _requested.set()


def clear() -> None:
    """Forget an earlier request (a long-lived process that goes on after an interrupt)."""
    _requested.clear()


def check() -> None:
    """Raise ``Interrupted`` when an interrupt was asked for."""
    if _requested.is_set():
        raise Interrupted()


@contextmanager
def stops_threads() -> Iterator[None]:
    """Around a wait on work running on other threads: an interrupt that reaches this thread
    in any form (``KeyboardInterrupt``, ``SystemExit``, Prefect's cancellation signal, none of
    them an ``Exception``) sets the flag, so the other threads stop too instead of being
    waited for."""
    try:
        yield
    except Exception:
        raise
    except BaseException:
        _requested.set()
        raise


def stop_on_signals() -> None:
    """Install the handlers: SIGINT interrupts (a second one exits at once), SIGTERM
    interrupts and unwinds with exit status 143. Only the main thread can set a signal
    handler: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, _on_sigint)
    signal.signal(signal.SIGTERM, _on_sigterm)


def _say(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # no terminal left to say it on
        pass


def _on_sigint(signum: int, frame: object) -> None:
    if _requested.is_set():
        _say("interrupted again: exiting now")
        os._exit(128 + signum)
    _requested.set()
    _say("interrupting: rolling back the work in flight (Ctrl-C again to exit at once)")
    raise KeyboardInterrupt


def _on_sigterm(signum: int, frame: object) -> None:
    _requested.set()
    raise SystemExit(128 + signum)
