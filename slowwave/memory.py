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
reached, and the records it returns name conversations as the tenant knows them. Every answer
and every error (``slowwave.errors``) is the one the server gives for the same call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, Self
from uuid import UUID

from slowwave.models.category import Category
from slowwave.models.embedding.base import Embedder
from slowwave.models.history import FactVersion
from slowwave.models.settings import Settings, get_settings
from slowwave.service import (
    Caller,
    ContextAnswer,
    Recorded,
    SearchAnswer,
    Service,
    Status,
)
from slowwave.sql.db import Database, migrate
from slowwave.tasks.profile import Profile
from slowwave.tasks.search import Ranker


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

    def _ready(self) -> Service:
        if not self._migrated:
            migrate(self._db.open())
            self._migrated = True
        return self.service

    def record(
        self,
        conversation_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        allow_forgotten: bool = False,
    ) -> Recorded:
        """Record messages of a conversation (each with ``message_id``, ``timestamp``,
        ``speaker``, ``text``, optionally ``session_id``): validated, idempotent by message id,
        segmented into episodes in event time. The answer lists every message refused."""
        return self._ready().record(
            self.caller, conversation_id, list(messages), allow_forgotten=allow_forgotten
        )

    def search(
        self,
        query: str,
        conversation_id: str,
        k: int = 10,
        *,
        category: Category | None = None,
        as_of: datetime | None = None,
        ranker: Ranker = "hybrid",
        output: Literal["json", "markdown", "split"] = "json",
    ) -> SearchAnswer:
        """The top ``k`` facts; active ones, or those valid at ``as_of`` (event time; UTC when
        it has no zone). ``output="markdown"`` adds the block for an agent's prompt."""
        return self._ready().search(
            self.caller,
            conversation_id,
            query,
            k=k,
            category=category,
            as_of=as_of,
            ranker=ranker,
            output=output,
        )

    def context(
        self, conversation_id: str, budget_tokens: int = 500, *, as_of: datetime | None = None
    ) -> ContextAnswer:
        """Guidelines and the top identity / preference facts, packed into a token budget."""
        return self._ready().context(self.caller, conversation_id, budget_tokens, as_of=as_of)

    def facts(
        self, conversation_id: str, *, as_of: datetime | None = None, everything: bool = False
    ) -> list[FactVersion]:
        """The conversation's active facts, those valid at ``as_of`` (event time), or all."""
        return self._ready().facts(self.caller, conversation_id, as_of=as_of, everything=everything)

    def history(self, fact_id: UUID) -> list[FactVersion]:
        """Every version of the fact, oldest first; a fact of another tenant is no fact."""
        return self._ready().history(self.caller, fact_id)

    def get_version(self, fact_id: UUID, n: int) -> FactVersion:
        """Version ``n`` (1 = the first) of the fact's chain."""
        return self._ready().version(self.caller, fact_id, n)

    def profile(self, conversation_id: str) -> Profile:
        """The conversation's stored profile (written after runs with ``SLOWWAVE_PROFILES``
        on, or by ``slowwave profile --refresh``); ``NotFound`` (code ``no_profile``) if it
        has none. ``stale``: its facts changed since it was written."""
        return self._ready().profile(self.caller, conversation_id)

    def status(self, conversation_id: str) -> Status:
        """Episodes pending, consolidated and quarantined; the last consolidation; facts."""
        return self._ready().status(self.caller, conversation_id)

    def has_facts(self, conversation_id: str) -> bool:
        """Whether the conversation has any consolidated fact (valid now or once)."""
        return self._ready().has_facts(self.caller, conversation_id)

    def close(self) -> None:
        self.service.close()

    def __enter__(self) -> Self:
        self._ready()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
