"""slowwave's operations, once for every surface.

Each operation — record, ingest, backfill, consolidate, search, context, facts, history,
profile, status, forget, revert, undelete, runs, quarantine, export, keys — is one method of
``Service``, taking the ``Caller`` that asks (a key's tenant and scope, or the operator). It
owns the defaults, time zones, existence checks, tenancy and the errors (``slowwave.errors``).
The Python API (``slowwave.Memory``, ``slowwave.forget``, …), the CLI, the REST routes, the MCP
tools and the Prefect flows parse their input, call it and render its answer; none of them
decides anything an operation decides.

    with Service.open(settings) as service:
        caller = Caller.operator("acme")
        service.record(caller, "dana", messages)
        answer = service.search(caller, "where does Dana live?", "dana")
"""

from __future__ import annotations

from slowwave.service.admin import Admin
from slowwave.service.answers import (
    ContextAnswer,
    Forgotten,
    Hit,
    NewKey,
    Recorded,
    Rejected,
    SearchAnswer,
    Status,
    Tombstone,
    Undeleted,
)
from slowwave.service.browse import Browse
from slowwave.service.caller import Caller
from slowwave.service.reads import Reads
from slowwave.service.writes import Writes


class Service(Reads, Writes, Admin, Browse):
    """Every operation (``reads``, ``writes``, ``admin``; ``browse``, what the memory browser
    reads besides) over one database and one embedder (``core.ServiceCore``)."""


__all__ = [
    "Caller",
    "ContextAnswer",
    "Forgotten",
    "Hit",
    "NewKey",
    "Recorded",
    "Rejected",
    "SearchAnswer",
    "Service",
    "Status",
    "Tombstone",
    "Undeleted",
]
