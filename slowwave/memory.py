"""A small Python API for agents: record what was said, search what was learned, or get a
context block — the service's operations (``slowwave.service``) for one tenant, in this process.

from slowwave import Memory

with Memory() as memory:
    memory.record("conv-26", [{"message_id": "m1", "timestamp": "2026-11-24T09:00:00Z",
                                "speaker": "Caroline", "text": "I moved to Lisbon."}])
    answer = memory.search("where does Caroline live?", "conv-26", k=5, output="markdown")
    print(answer.markdown)
    print(memory.context("conv-26", budget_tokens=400).context)
    for version in memory.history(answer.hits[0].id):
        print(version.version, version.fact, version.valid_at, version.invalid_at)

A ``Memory`` reads and records one tenant's conversations (``Memory(tenant="acme")``; the
default tenant when none is named): another tenant's conversation of the same id is never
reached, and the records it returns name conversations as the tenant knows them. Each method
is the service's operation of the same name with this memory's caller: the same parameters, the
same answer, the same errors (``slowwave.errors``) as the server gives for the same call.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Concatenate, ParamSpec, Self, TypeVar

from slowwave.models.embedding.base import Embedder
from slowwave.models.settings import Settings, get_settings
from slowwave.service import Caller, Service
from slowwave.sql.db import Database, migrate

P = ParamSpec("P")
R = TypeVar("R")


def _as_caller(
    operation: Callable[Concatenate[Service, Caller, P], R],
) -> Callable[Concatenate[Memory, P], R]:
    """The service's ``operation`` as a method of ``Memory``: its caller filled in."""

    @wraps(operation)
    def method(memory: Memory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return operation(memory.ready(), memory.caller, *args, **kwargs)

    return method


class Memory:
    """An agent's access to slowwave's memory for one process: record messages (episodic),
    read what the runs consolidated (semantic). The database is opened and migrated on first
    use; an embedder passed in stays the caller's to close, one loaded here is closed here."""

    def __init__(
        self,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        *,
        tenant: str = "default",
        database: Database | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        self.caller = Caller.operator(tenant)
        self.tenant = self.caller.tenant
        self._db = database or Database(self.settings)
        self._migrated = False
        self.service = Service(self.settings, self._db, embedder, own_db=database is None)

    def ready(self) -> Service:
        """The service, its database open and migrated."""
        if not self._migrated:
            migrate(self._db.open())
            self._migrated = True
        return self.service

    record = _as_caller(Service.record)
    search = _as_caller(Service.search)
    context = _as_caller(Service.context)
    facts = _as_caller(Service.facts)
    history = _as_caller(Service.history)
    get_version = _as_caller(Service.version)
    profile = _as_caller(Service.profile)
    status = _as_caller(Service.status)
    has_facts = _as_caller(Service.has_facts)

    def close(self) -> None:
        self.service.close()

    def __enter__(self) -> Self:
        self.ready()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
