"""A small Python API for agents: record what was said, search consolidated memory, or get a
context block.

from slowwave import Memory

with Memory() as memory:
    memory.record("conv-26", [{"message_id": "m1", "timestamp": "2026-11-24T09:00:00Z",
                                "speaker": "Caroline", "text": "I moved to Lisbon."}])
    hits = memory.search("where does Caroline live?", conversation_id="conv-26", k=5)
    print(memory.markdown(hits))
    print(memory.context("conv-26", budget_tokens=400))
    print(memory.profile("conv-26"))  # with SLOWWAVE_PROFILES on: the model-written profile
    for version in memory.history(hits[0].id):
        print(version.version, version.fact, version.valid_at, version.invalid_at)

A ``Memory`` reads and records one tenant's conversations (``Memory(tenant="acme")``; the
default tenant when none is named): another tenant's conversation of the same id is never
reached, and the records it returns name conversations as the tenant knows them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self
from uuid import UUID

from slowwave.models.category import Category
from slowwave.models.embedding import load_embedder
from slowwave.models.embedding.base import Embedder
from slowwave.models.history import FactVersion
from slowwave.models.settings import Settings, get_settings
from slowwave.models.tenant import DEFAULT_TENANT, check_tenant, conversation_key, conversation_of
from slowwave.sql.db import Database, migrate
from slowwave.tasks.history import fact_history, get_version, list_facts
from slowwave.tasks.ingest.transcripts import IngestPolicy, IngestReport, record
from slowwave.tasks.profile import Profile, read_profile
from slowwave.tasks.search import (
    Ranker,
    SearchHit,
    SearchPolicy,
    context,
    has_facts,
    record_retrieval,
    render_markdown,
    render_split,
    search,
)


class Memory:
    """An agent's access to slowwave's memory for one process: record messages (episodic),
    read what the nightly runs consolidated (semantic)."""

    def __init__(
        self,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        *,
        tenant: str = DEFAULT_TENANT,
        database: Database | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        self.tenant = check_tenant(tenant)
        self._own_db = database is None
        self._db = database or Database(self.settings)
        self._embedder = embedder

    def key(self, conversation_id: str) -> str:
        """The stored key of this tenant's conversation (``models.tenant``)."""
        return conversation_key(conversation_id, self.tenant)

    def _theirs(self, versions: Iterable[FactVersion]) -> list[FactVersion]:
        return [
            v.model_copy(update={"conversation_id": conversation_of(v.conversation_id)})
            for v in versions
        ]

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = load_embedder(self.settings)
        return self._embedder

    def search(
        self,
        query: str,
        conversation_id: str,
        k: int = 10,
        *,
        category: Category | str | None = None,
        as_of: datetime | None = None,
        ranker: Ranker = "hybrid",
    ) -> list[SearchHit]:
        """Top ``k`` facts; active ones, or those valid at ``as_of`` (event time). The facts served
        are recorded as retrieved (``SLOWWAVE_MAX_ACTIVE_FACTS`` keeps the recently used)."""
        with self._db.open().connection() as conn:
            hits = search(
                conn,
                self.embedder,
                query,
                self.key(conversation_id),
                k,
                category=category,
                as_of=as_of,
                ranker=ranker,
                policy=SearchPolicy.of(self.settings),
            )
            record_retrieval(conn, [h.id for h in hits])  # what a capacity cap keeps
        return hits

    def record(
        self,
        conversation_id: str,
        messages: Iterable[Mapping[str, Any]],
        *,
        allow_forgotten: bool = False,
    ) -> IngestReport:
        """Record messages of a conversation (each with ``message_id``, ``timestamp``,
        ``speaker``, ``text``, optionally ``session_id``) through the path ``slowwave ingest``
        takes: validated, idempotent (a message id recorded before is skipped), segmented into
        episodes in event time; a forgotten conversation is refused unless
        ``allow_forgotten``. The next run consolidates them. The report lists what was
        refused, with the reasons."""
        self.ensure_schema()
        policy = IngestPolicy.of(self.settings, allow_forgotten=allow_forgotten, tenant=self.tenant)
        return record(self._db.open(), conversation_id, messages, policy)

    def ensure_schema(self) -> None:
        """Migrate when needed (a fresh database has no tables, and no vector type yet)."""
        migrate(self._db.open())

    def has_facts(self, conversation_id: str) -> bool:
        """Whether the conversation has any consolidated fact (valid now or once)."""
        with self._db.open().connection() as conn:
            return has_facts(conn, self.key(conversation_id))

    def context(
        self, conversation_id: str, budget_tokens: int = 500, *, as_of: datetime | None = None
    ) -> str:
        """Guidelines and the top identity / preference facts, packed into a token budget."""
        with self._db.open().connection() as conn:
            return context(conn, self.key(conversation_id), budget_tokens, as_of=as_of)

    def profile(self, conversation_id: str) -> Profile | None:
        """The conversation's stored profile (written after runs with ``SLOWWAVE_PROFILES`` on,
        or by ``slowwave profile --refresh``); None if it has none. ``stale``: its facts changed
        since it was written."""
        with self._db.open().connection() as conn:
            return read_profile(conn, self.key(conversation_id))

    def facts(
        self, conversation_id: str, *, as_of: datetime | None = None, everything: bool = False
    ) -> list[FactVersion]:
        """The conversation's active facts, those valid at ``as_of`` (event time; UTC when it
        has no zone, as on the command line), or all."""
        if as_of is not None and as_of.tzinfo is None:
            as_of = as_of.replace(tzinfo=UTC)
        with self._db.open().connection() as conn:
            facts = list_facts(conn, self.key(conversation_id), as_of=as_of, everything=everything)
        return self._theirs(facts)

    def history(self, fact_id: UUID) -> list[FactVersion]:
        """Every version of the fact, oldest first (lineage both ways); a fact of another
        tenant is no fact."""
        with self._db.open().connection() as conn:
            return self._theirs(fact_history(conn, fact_id, tenant=self.tenant))

    def get_version(self, fact_id: UUID, n: int) -> FactVersion:
        """Version ``n`` (1 = the first) of the fact's chain."""
        with self._db.open().connection() as conn:
            return self._theirs([get_version(conn, fact_id, n, tenant=self.tenant)])[0]

    @staticmethod
    def markdown(hits: Sequence[SearchHit], *, split_guidelines: bool = False) -> str:
        return render_split(hits) if split_guidelines else render_markdown(hits)

    def close(self) -> None:
        if self._own_db:
            self._db.close()
        if self._embedder is not None:
            self._embedder.close()

    def __enter__(self) -> Self:
        self._db.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
