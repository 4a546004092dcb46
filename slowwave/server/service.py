"""What the server does, once for REST and MCP: one tenant's memory, as its caller may see it.

Every operation takes the ``Caller`` a key made (its tenant and scope) and answers in JSON-able
records. A conversation is always the caller's tenant's: another tenant's conversation of the
same id is a different conversation (``models.tenant``), so it answers exactly like one that
does not exist. Errors are ``ApiError``s: a status, a code and a message a person can act on.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import PoolTimeout
from pydantic import BaseModel, Field

from slowwave import sql
from slowwave.models.category import Category
from slowwave.models.embedding.base import Embedder
from slowwave.models.embedding.batching import EmbeddingBatcher
from slowwave.models.errors import SlowwaveError
from slowwave.models.history import FactVersion
from slowwave.models.keys import ApiKey, Scope
from slowwave.models.settings import Settings
from slowwave.models.tenant import (
    DEFAULT_TENANT,
    InvalidConversationId,
    conversation_key,
    conversation_of,
)
from slowwave.sql.db import Database
from slowwave.tasks.forget import forget_conversation
from slowwave.tasks.history import HistoryError, fact_history, list_facts
from slowwave.tasks.ingest.transcripts import IngestPolicy, record
from slowwave.tasks.keys import UnknownKey, create_key, list_keys, revoke_key
from slowwave.tasks.profile import read_profile
from slowwave.tasks.quarantine import list_quarantined
from slowwave.tasks.search import (
    SearchError,
    SearchPolicy,
    context,
    record_retrieval,
    render_markdown,
    search,
)

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """An answer that is not a success: the HTTP status, a stable code and what to do."""

    def __init__(
        self, status: int, code: str, message: str, *, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s


def not_found(conversation_id: str) -> ApiError:
    return ApiError(
        404,
        "not_found",
        f"no conversation {conversation_id!r}: nothing was recorded under that id",
    )


@dataclass(frozen=True)
class Caller:
    """Who asks: a key's tenant and scope (or the operator's, when the server runs without
    keys), and how the key is named in what it does (never the key)."""

    tenant: str
    scope: Scope
    name: str

    @classmethod
    def of(cls, key: ApiKey) -> Caller:
        return cls(key.tenant, key.scope, f"key {key.prefix}… ({key.tenant})")

    @classmethod
    def operator(cls) -> Caller:
        return cls(DEFAULT_TENANT, Scope.admin, "the operator (no keys)")

    def needs(self, scope: Scope) -> None:
        if not self.scope.allows(scope):
            raise ApiError(
                403, "forbidden", f"this key's scope is {self.scope.value}: it needs {scope.value}"
            )

    def key(self, conversation_id: str) -> str:
        try:
            return conversation_key(conversation_id, self.tenant)
        except InvalidConversationId as exc:
            raise ApiError(422, "invalid_conversation_id", str(exc)) from None


# ── records answered ─────────────────────────────────────────────────────────
class Rejected(BaseModel):
    index: int = Field(description="The message's place in the request, 0 for the first.")
    message_id: str | None
    reason: str


class Recorded(BaseModel):
    conversation_id: str
    received: int
    recorded: int = Field(description="Messages stored by this request.")
    already_recorded: int = Field(description="Messages stored before (by message id): kept.")
    rejected: list[Rejected]
    episodes_new: int
    episodes_grown: int


class Hit(BaseModel):
    id: UUID
    category: Category
    fact: str
    score: float
    valid_at: datetime
    invalid_at: datetime | None
    sources: int
    ranks: dict[str, int | None] = Field(description="The fact's rank in each channel.")


class SearchAnswer(BaseModel):
    conversation_id: str
    query: str
    hits: list[Hit]
    markdown: str | None = None


class Status(BaseModel):
    conversation_id: str
    episodes_pending: int
    episodes_consolidated: int
    episodes_quarantined: int
    last_consolidated_at: datetime | None
    last_message_at: datetime | None
    facts_active: int
    facts_invalidated: int


class Retrievals:
    """Which facts searches served, written by a thread of their own: a search answers
    without waiting on the write, and the write passes over facts a run holds locked."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._queue: queue.SimpleQueue[list[UUID] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="slowwave-retrievals", daemon=True)
        self._thread.start()

    def add(self, ids: Sequence[UUID]) -> None:
        if ids:
            self._queue.put(list(ids))

    def _loop(self) -> None:
        while True:
            ids = self._queue.get()
            if ids is None:
                return
            while not self._queue.empty():  # whatever came meanwhile, in one statement
                more = self._queue.get()
                if more is None:
                    self._write(ids)
                    return
                ids += more
            self._write(ids)

    def _write(self, ids: list[UUID]) -> None:
        try:
            with self._db.connection() as conn:
                record_retrieval(conn, sorted(set(ids)))
        except (psycopg.Error, PoolTimeout) as exc:  # a best effort: the next search retries
            logger.warning("could not record %d retrieved fact(s): %s", len(ids), exc)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)


class MemoryService:
    """The server's one state: a database pool, the embedding model, limits. Stateless
    otherwise: every state is in Postgres, so replicas serve one database."""

    def __init__(self, settings: Settings, db: Database, embedder: Embedder) -> None:
        self.settings = settings
        self.db = db
        self.embedder = embedder
        self.batcher = EmbeddingBatcher(embedder, max_batch=settings.serve_embed_batch)
        self.retrievals = Retrievals(db)
        self.search_policy = SearchPolicy.of(settings)

    def close(self) -> None:
        self.retrievals.close()
        self.batcher.close()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection, or a fast 503 when every one is busy."""
        try:
            with self.db.connection() as conn:
                yield conn
        except PoolTimeout:
            raise ApiError(
                503,
                "busy",
                "every database connection of this server is busy: retry shortly",
                retry_after_s=1,
            ) from None

    # ── record ──────────────────────────────────────────────────────────────
    def record(
        self, caller: Caller, conversation_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> Recorded:
        caller.needs(Scope.write)
        caller.key(conversation_id)  # refused before anything is read
        if len(messages) > self.settings.serve_max_messages:
            raise ApiError(
                413,
                "too_many_messages",
                f"{len(messages)} messages in one request: send at most "
                f"{self.settings.serve_max_messages} (SLOWWAVE_SERVE_MAX_MESSAGES)",
            )
        policy = IngestPolicy.of(self.settings, tenant=caller.tenant)
        try:
            report = record(self.db, conversation_id, messages, policy)
        except PoolTimeout:
            raise ApiError(
                503, "busy", "every database connection is busy", retry_after_s=1
            ) from None
        rejected = [
            Rejected(
                index=r.line - 1,
                message_id=_message_id(messages[r.line - 1])
                if 0 < r.line <= len(messages)
                else None,
                reason=r.reason,
            )
            for r in report.first_rejects
        ]
        valid = report.read - report.rejected - report.out_of_range
        return Recorded(
            conversation_id=conversation_id,
            received=len(messages),
            recorded=report.ingested,
            already_recorded=max(valid - report.ingested, 0),
            rejected=rejected,
            episodes_new=report.episodes,
            episodes_grown=report.grown,
        )

    # ── read ────────────────────────────────────────────────────────────────
    def search(
        self,
        caller: Caller,
        conversation_id: str,
        query: str,
        *,
        k: int = 10,
        category: Category | None = None,
        as_of: datetime | None = None,
        output: Literal["json", "markdown"] = "json",
    ) -> SearchAnswer:
        caller.needs(Scope.read)
        key = caller.key(conversation_id)
        self._check_query(query, k)
        vector = self.batcher.embed(query)
        with self.connection() as conn:
            try:
                found = search(
                    conn,
                    self.embedder,
                    query,
                    key,
                    k,
                    category=category,
                    as_of=_zoned(as_of),
                    policy=self.search_policy,
                    vector=vector,
                )
            except SearchError as exc:
                raise ApiError(422, "invalid_query", str(exc)) from None
            if not found:
                self._require(conn, key, conversation_id)
        self.retrievals.add([h.id for h in found])
        hits = [
            Hit(
                id=h.id,
                category=h.category,
                fact=h.fact,
                score=h.score,
                valid_at=h.valid_at,
                invalid_at=h.invalid_at,
                sources=h.sources,
                ranks={
                    "fulltext": h.fulltext_rank,
                    "vector": h.vector_rank,
                    "temporal": h.temporal_rank,
                    "episode": h.episode_rank,
                    "session": h.session_rank,
                },
            )
            for h in found
        ]
        markdown = render_markdown(found) if output == "markdown" else None
        return SearchAnswer(
            conversation_id=conversation_id, query=query, hits=hits, markdown=markdown
        )

    def context(
        self,
        caller: Caller,
        conversation_id: str,
        budget_tokens: int = 500,
        as_of: datetime | None = None,
    ) -> str:
        caller.needs(Scope.read)
        key = caller.key(conversation_id)
        if not 1 <= budget_tokens <= 100_000:
            raise ApiError(422, "invalid_budget", "budget_tokens must be from 1 to 100000")
        with self.connection() as conn:
            block = context(conn, key, budget_tokens, as_of=_zoned(as_of))
            if not block:
                self._require(conn, key, conversation_id)
        return block

    def facts(
        self,
        caller: Caller,
        conversation_id: str,
        *,
        as_of: datetime | None = None,
        everything: bool = False,
    ) -> list[FactVersion]:
        caller.needs(Scope.read)
        key = caller.key(conversation_id)
        with self.connection() as conn:
            facts = list_facts(conn, key, as_of=_zoned(as_of), everything=everything)
            if not facts:
                self._require(conn, key, conversation_id)
        return [_theirs(f) for f in facts]

    def history(self, caller: Caller, fact_id: UUID) -> list[FactVersion]:
        caller.needs(Scope.read)
        with self.connection() as conn:
            try:
                versions = fact_history(conn, fact_id, tenant=caller.tenant)
            except HistoryError:
                raise ApiError(404, "not_found", f"no fact {fact_id}") from None
        return [_theirs(v) for v in versions]

    def profile(self, caller: Caller, conversation_id: str) -> dict[str, Any]:
        caller.needs(Scope.read)
        key = caller.key(conversation_id)
        with self.connection() as conn:
            profile = read_profile(conn, key)
            if profile is None:
                self._require(conn, key, conversation_id)
                raise ApiError(
                    404,
                    "no_profile",
                    f"conversation {conversation_id!r} has no profile yet: runs write them "
                    "with SLOWWAVE_PROFILES=true",
                )
        return {**profile.model_dump(mode="json"), "conversation_id": conversation_id}

    def status(self, caller: Caller, conversation_id: str) -> Status:
        caller.needs(Scope.read)
        key = caller.key(conversation_id)
        with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(
                sql.statement("conversation_status"), {"conversation_id": key}
            ).fetchone()
        counts = (
            "episodes_pending",
            "episodes_consolidated",
            "episodes_quarantined",
            "facts_active",
            "facts_invalidated",
        )
        if row is None or not any(row[c] for c in counts):
            raise not_found(conversation_id)
        return Status(conversation_id=conversation_id, **row)

    # ── admin ───────────────────────────────────────────────────────────────
    def forget(
        self, caller: Caller, conversation_id: str, *, reason: str, purge: bool = False
    ) -> dict[str, Any]:
        caller.needs(Scope.admin)
        key = caller.key(conversation_id)
        if not reason.strip():
            raise ApiError(422, "reason_required", "a forget needs a reason (?reason=…)")
        with self.connection() as conn:
            self._require(conn, key, conversation_id)
        report = forget_conversation(
            self.db, key, home=self.settings.home, by=caller.name, reason=reason, purge=purge
        )
        # the operator's export paths and their errors are the server's log's, not a tenant's
        answer = asdict(report)
        answer["export_notes"] = len(answer["export_notes"])
        return answer

    def runs(self, caller: Caller, limit: int = 20) -> list[dict[str, Any]]:
        """The latest runs: the operator's (a run spans every tenant), for admin keys of the
        default tenant."""
        caller.needs(Scope.admin)
        if caller.tenant != DEFAULT_TENANT:
            raise ApiError(
                403, "forbidden", "runs span every tenant: list them with a default-tenant key"
            )
        if not 1 <= limit <= 1000:
            raise ApiError(422, "invalid_limit", "limit must be from 1 to 1000")
        with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            return list(cur.execute(sql.statement("runs_list"), {"limit": limit}).fetchall())

    def quarantine(self, caller: Caller) -> list[dict[str, Any]]:
        caller.needs(Scope.admin)
        with self.connection() as conn:
            episodes = list_quarantined(conn, tenant=caller.tenant)
        return [
            {
                **e.model_dump(mode="json"),
                "conversation_id": conversation_of(e.conversation_id),
                "external_key": conversation_of(e.external_key),
            }
            for e in episodes
        ]

    def keys(self, caller: Caller) -> list[ApiKey]:
        caller.needs(Scope.admin)
        with self.connection() as conn:
            return list_keys(conn, caller.tenant)

    def create_key(self, caller: Caller, scope: Scope, name: str = "") -> tuple[str, ApiKey]:
        caller.needs(Scope.admin)
        with self.connection() as conn:
            return create_key(conn, caller.tenant, scope, by=caller.name, name=name)

    def revoke_key(self, caller: Caller, name: str) -> ApiKey:
        caller.needs(Scope.admin)
        with self.connection() as conn:
            try:
                return revoke_key(conn, name, tenant=caller.tenant)
            except UnknownKey as exc:
                raise ApiError(404, "not_found", str(exc)) from None

    # ── helpers ─────────────────────────────────────────────────────────────
    def _check_query(self, query: str, k: int) -> None:
        limit = self.settings.serve_max_query_chars
        if not query.strip():
            raise ApiError(422, "invalid_query", "the query is empty")
        if len(query) > limit:
            raise ApiError(
                422, "invalid_query", f"the query has {len(query)} characters, more than {limit}"
            )
        if not 1 <= k <= self.settings.serve_max_k:
            raise ApiError(
                422, "invalid_k", f"k must be from 1 to {self.settings.serve_max_k}, not {k}"
            )

    def _require(self, conn: psycopg.Connection, key: str, conversation_id: str) -> None:
        """A conversation the tenant has (an episode or a fact), or 404."""
        row = conn.execute(
            sql.statement("conversation_exists"), {"conversation_id": key}
        ).fetchone()
        if row is None or not row[0]:
            raise not_found(conversation_id)


def _message_id(message: Any) -> str | None:
    if isinstance(message, Mapping):
        value = message.get("message_id")
        return str(value)[:200] if isinstance(value, str | int) else None
    return None


def _zoned(at: datetime | None) -> datetime | None:
    return at.replace(tzinfo=UTC) if at is not None and at.tzinfo is None else at


def _theirs(version: FactVersion) -> FactVersion:
    return version.model_copy(update={"conversation_id": conversation_of(version.conversation_id)})


__all__ = ["ApiError", "Caller", "MemoryService", "SlowwaveError"]
