"""An operation (a forget, a revert) that arrives while a run is at a fault point.

The run works in a thread of the test's process and is held at the point (``models.faultpoints``)
with whatever transaction it has open there; the operation starts in another thread, is given
time to wait for that transaction, and then the run is let go. What each did, and how long the
operation took once the run went on, come back together. Used by the tests and by
``benchmarks.reliability``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from slowwave.models import faultpoints

R = TypeVar("R")
O = TypeVar("O")  # noqa: E741

# How long the operation is given to wait on the held run before the run is let go.
SETTLE_S = 1.5


class _Worker(threading.Thread, Generic[R]):
    """A thread that keeps its function's result or exception and when it ended."""

    def __init__(self, name: str, work: Callable[[], R]) -> None:
        super().__init__(name=name, daemon=True)
        self.work = work
        self.result: R | None = None
        self.error: BaseException | None = None
        self.ended_at: float | None = None

    def run(self) -> None:
        try:
            self.result = self.work()
        except BaseException as exc:
            self.error = exc
        finally:
            self.ended_at = time.monotonic()

    def outcome(self, timeout: float) -> R:
        self.join(timeout)
        if self.is_alive():
            raise TimeoutError(f"{self.name} did not end within {timeout} s")
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


@dataclass
class Arrival(Generic[R, O]):
    """What the run and the operation did when the operation arrived at the point."""

    run: R
    operation: O
    waited: bool  # the operation was still waiting when the run was let go
    seconds_after_release: float  # from letting the run go to the operation's end (0: before)


def arrive_during(
    point: str,
    hit: int,
    run: Callable[[], R],
    operation: Callable[[], O],
    *,
    settle_s: float = SETTLE_S,
    timeout_s: float = 180.0,
) -> Arrival[R, O]:
    """Start ``run``, hold it the ``hit``-th time it reaches ``point``, start ``operation``,
    let the run go after ``settle_s`` (or as soon as the operation ends), wait for both."""
    reached, go = threading.Event(), threading.Event()

    def hold(_: str, __: Any) -> None:
        reached.set()
        go.wait(timeout_s)

    faultpoints.arm(point, hold, at_hit=hit)
    runner: _Worker[R] = _Worker("run", run)
    runner.start()
    try:
        while not reached.wait(0.05):
            if not runner.is_alive():
                runner.outcome(0)  # its error, if it failed
                raise AssertionError(f"the run ended without reaching {point} (hit {hit})")
        operator: _Worker[O] = _Worker("operation", operation)
        operator.start()
        operator.join(settle_s)
        waited = operator.is_alive()
    finally:
        released = time.monotonic()
        go.set()
        faultpoints.disarm()
    done = operator.outcome(timeout_s)
    assert operator.ended_at is not None
    return Arrival(
        run=runner.outcome(timeout_s),
        operation=done,
        waited=waited,
        seconds_after_release=max(operator.ended_at - released, 0.0),
    )
