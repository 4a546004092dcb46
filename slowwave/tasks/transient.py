"""Which failures are transient: the infrastructure's, not the work's.

A dropped database connection, an unreachable or dead engine, a lost Ray actor or node (which
the worker pool reports as ``RuntimeUnreachable``): a retry (Prefect's, of the shard) fixes
them, and they say nothing about the chunk in flight, so they must not count as one of its
attempts towards quarantine. Anything else raised while answering a chunk is that chunk's
failure.
"""

from __future__ import annotations

import psycopg


def is_transient(exc: BaseException) -> bool:
    """``RuntimeUnreachable`` is a ``ConnectionError``."""
    return isinstance(exc, psycopg.OperationalError | ConnectionError | TimeoutError)
