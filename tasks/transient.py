"""Which failures are transient: the infrastructure's, not the work's.

A dropped database connection, an unreachable or dead engine, a lost Ray actor or node: a
retry (Prefect's, of the shard) fixes them, and they say nothing about the chunk in flight,
so they must not count as one of its attempts towards quarantine. Anything else raised while
answering a chunk — including an exception a runtime raised inside a Ray actor — is that
chunk's failure.
"""

from __future__ import annotations

import sys

import psycopg


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, psycopg.OperationalError | ConnectionError | TimeoutError):
        return True
    # Ray is not imported here: it reads its settings on import, which models.ray_cluster
    # must make first; without Ray loaded no Ray exception exists
    ray_errors = sys.modules.get("ray.exceptions")
    if ray_errors is None:
        return False
    if isinstance(exc, ray_errors.RayTaskError):  # raised by the code the actor ran: look in
        cause = exc.cause
        return cause is not None and cause is not exc and is_transient(cause)
    lost = (  # the actor, its process or its node went away; a restarted actor answers again
        ray_errors.RayActorError,  # ActorDiedError, ActorUnavailableError
        ray_errors.WorkerCrashedError,
        ray_errors.NodeDiedError,
        ray_errors.ObjectLostError,
        ray_errors.RaySystemError,
    )
    return isinstance(exc, lost)
