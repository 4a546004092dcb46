"""Named moments on the write path where a test can inject a fault.

The crash and database-fault tests (``tests/reliability/``) must hit a precise moment (after
the model answered, between two statements of a chunk's transaction, just after its COMMIT)
every time, not by timing luck. The write path calls ``reached(name)`` at each of the
``POINTS``; a test ``arm``s one with an action (stop the process and let the test SIGKILL it,
or drop the database connection). Unarmed, which is always the case outside tests, a point is
one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# The statements of a chunk's transaction, in the order apply runs them (tasks/apply.py).
APPLY_STEPS = (
    "lock_episodes",
    "lock_targets",
    "dedupe",
    "invalidate",
    "insert_facts",
    "reinforce",
    "record_chunk",
    "write_log",
    "mark_consolidated",
)

# A consolidation run's points, in the order a run passes them (the crash suite kills a run
# at each).
RUN_POINTS: tuple[str, ...] = (
    # a run that names its conversations closed their open episodes (committed), before planning
    "close.after",
    "claim.before",
    "claim.after",
    "model.answered",
    *(f"apply.{step}.{when}" for step in APPLY_STEPS for when in ("before", "after")),
    "commit.before",
    "commit.after",
)
POINTS: tuple[str, ...] = (
    *RUN_POINTS,
    # ingest of a folder or glob: a file's messages committed, the next not started
    "ingest.file.committed",
    # ingest of a source of many conversations: one group's episodes committed (on any of the
    # connections writing groups at once)
    "ingest.group.committed",
)

Action = Callable[[str, Any], None]
_armed: dict[str, tuple[int, Action]] = {}


def arm(point: str, action: Action, *, at_hit: int = 1) -> None:
    """Run ``action(point, conn)`` the ``at_hit``-th time ``point`` is reached (once)."""
    if point not in POINTS:
        raise ValueError(f"unknown fault point {point!r}; one of {', '.join(POINTS)}")
    _armed[point] = (at_hit, action)


def disarm() -> None:
    _armed.clear()


def reached(point: str, conn: Any = None) -> None:
    """The write path is at ``point`` (with ``conn``, the connection it is using, if any)."""
    if not _armed:
        return
    armed = _armed.get(point)
    if armed is None:
        return
    hits, action = armed
    if hits > 1:
        _armed[point] = (hits - 1, action)
        return
    del _armed[point]
    action(point, conn)


@contextmanager
def around(step: str, conn: Any = None) -> Iterator[None]:
    """``apply.STEP.before`` and ``apply.STEP.after`` around one statement of apply."""
    reached(f"apply.{step}.before", conn)
    yield
    reached(f"apply.{step}.after", conn)
