"""The reads: search, context, facts, a fact's history, a profile, a conversation's status."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

from psycopg.rows import dict_row

from slowwave import sql
from slowwave.models.category import Category
from slowwave.models.errors import Gone, InvalidRequest, NotFound
from slowwave.models.history import FactVersion
from slowwave.models.keys import Scope
from slowwave.models.tenant import conversation_of
from slowwave.service.answers import ContextAnswer, Hit, SearchAnswer, Status, Tombstone
from slowwave.service.caller import Caller
from slowwave.service.core import ServiceCore, not_found
from slowwave.tasks.history import fact_history, get_version, list_facts
from slowwave.tasks.ids import IdKind, shorten
from slowwave.tasks.profile import Profile, read_profile
from slowwave.tasks.search import (
    Ranker,
    context,
    has_facts,
    render_markdown,
    render_split,
    search,
)

MAX_CONTEXT_TOKENS = 100_000


def zoned(at: datetime | None) -> datetime | None:
    """An event time as every surface reads it: one without a zone is UTC."""
    return at.replace(tzinfo=UTC) if at is not None and at.tzinfo is None else at


def theirs(version: FactVersion) -> FactVersion:
    """A fact as its tenant names its conversation."""
    return version.model_copy(update={"conversation_id": conversation_of(version.conversation_id)})


class Reads(ServiceCore):
    def search(
        self,
        caller: Caller,
        query: str,
        conversation_id: str,
        k: int = 10,
        *,
        category: Category | None = None,
        as_of: datetime | None = None,
        ranker: Ranker = "hybrid",
        output: Literal["json", "markdown", "split"] = "json",
    ) -> SearchAnswer:
        """The top ``k`` facts for ``query``: active ones, or those valid at ``as_of`` (event
        time). The facts served are recorded as retrieved. ``output``: ``markdown`` adds the
        block an agent's prompt takes (``split``: guidelines apart)."""
        caller.needs(Scope.read)
        key = caller.key(conversation_id)
        self._check_query(query, k)
        vector = self.embed_query(query) if ranker != "fulltext" else None
        with self.connection() as conn:
            found = search(
                conn,
                self.embedder,
                query,
                key,
                k,
                category=category,
                as_of=zoned(as_of),
                ranker=ranker,
                policy=self.search_policy,
                vector=vector,
            )
            if not found:
                self.require(conn, key, conversation_id)
            self.served([h.id for h in found], conn)
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
        markdown = {"json": None, "markdown": render_markdown, "split": render_split}[output]
        return SearchAnswer(
            conversation_id=conversation_id,
            query=query,
            hits=hits,
            markdown=markdown(found) if markdown is not None else None,
        )

    def context(
        self,
        caller: Caller,
        conversation_id: str,
        budget_tokens: int = 500,
        *,
        as_of: datetime | None = None,
    ) -> ContextAnswer:
        """Guidelines and the top identity / preference facts, packed into a token budget."""
        caller.needs(Scope.read)
        key = caller.key(conversation_id)
        if not 1 <= budget_tokens <= MAX_CONTEXT_TOKENS:
            raise InvalidRequest(
                f"budget_tokens must be from 1 to {MAX_CONTEXT_TOKENS}", code="invalid_budget"
            )
        with self.connection() as conn:
            block = context(conn, key, budget_tokens, as_of=zoned(as_of))
            if not block:
                self.require(conn, key, conversation_id)
        return ContextAnswer(conversation_id=conversation_id, context=block)

    def facts(
        self,
        caller: Caller,
        conversation_id: str,
        *,
        as_of: datetime | None = None,
        everything: bool = False,
    ) -> list[FactVersion]:
        """The conversation's active facts, those valid at ``as_of`` (event time), or all."""
        caller.needs(Scope.read)
        key = caller.key(conversation_id)
        with self.connection() as conn:
            facts = list_facts(conn, key, as_of=zoned(as_of), everything=everything)
            if not facts:
                self.require(conn, key, conversation_id)
        return [theirs(f) for f in facts]

    def history(self, caller: Caller, fact_id: UUID | str) -> list[FactVersion]:
        """Every version of the fact (any version's id, or its short id), oldest first;
        another tenant's fact is no fact."""
        caller.needs(Scope.read)
        with self.connection() as conn:
            fact = self.resolve(conn, "fact", fact_id)
            return [theirs(v) for v in fact_history(conn, fact, tenant=caller.tenant)]

    def version(self, caller: Caller, fact_id: UUID | str, n: int) -> FactVersion:
        """Version ``n`` (1 = the first) of the fact's chain."""
        caller.needs(Scope.read)
        with self.connection() as conn:
            fact = self.resolve(conn, "fact", fact_id)
            return theirs(get_version(conn, fact, n, tenant=caller.tenant))

    def short_ids(self, caller: Caller, kind: IdKind, ids: Iterable[UUID]) -> dict[UUID, str]:
        """Each id's short form, as listings print it and every operation that takes an id
        takes it back: the shortest start of its last group that names it alone among the
        ids of ``kind``."""
        caller.needs(Scope.read)
        ids = list(ids)
        if not ids:
            return {}
        with self.connection() as conn:
            return shorten(conn, kind, ids)

    def profile(self, caller: Caller, conversation_id: str) -> Profile:
        """The conversation's stored profile (written after runs with ``SLOWWAVE_PROFILES``)."""
        caller.needs(Scope.read)
        key = caller.key(conversation_id)
        with self.connection() as conn:
            profile = read_profile(conn, key)
            if profile is None:
                self.require(conn, key, conversation_id)
                raise NotFound(
                    f"conversation {conversation_id!r} has no profile yet: runs write them "
                    "with SLOWWAVE_PROFILES=true",
                    code="no_profile",
                )
        return profile.model_copy(update={"conversation_id": conversation_id})

    def status(self, caller: Caller, conversation_id: str) -> Status:
        """Episodes pending, consolidated and quarantined; the last consolidation; facts. A
        conversation that was forgotten answers ``Gone`` with its tombstone."""
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
                stone = cur.execute(
                    sql.statement("conversation_tombstone"), {"conversation_id": key}
                ).fetchone()
                if stone is None:
                    raise not_found(conversation_id)
                purged = stone["purged_at"] is not None
                raise forgotten(Tombstone(conversation_id=conversation_id, purged=purged, **stone))
        return Status(conversation_id=conversation_id, **row)

    def has_facts(self, caller: Caller, conversation_id: str) -> bool:
        """Whether the conversation has any consolidated fact (valid now or once)."""
        caller.needs(Scope.read)
        with self.connection() as conn:
            return has_facts(conn, caller.key(conversation_id))

    def _check_query(self, query: str, k: int) -> None:
        limit = self.settings.serve.max_query_chars
        if not query.strip():
            raise InvalidRequest("the query is empty", code="invalid_query")
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRequest(
                "the query is not valid UTF-8 text", code="invalid_query"
            ) from None
        if len(query) > limit:
            raise InvalidRequest(
                f"the query has {len(query)} characters, more than {limit}", code="invalid_query"
            )
        if not 1 <= k <= self.settings.serve.max_k:
            raise InvalidRequest(
                f"k must be from 1 to {self.settings.serve.max_k}, not {k}", code="invalid_k"
            )


def forgotten(stone: Tombstone) -> Gone:
    purged = (
        f"its bytes were purged at {stone.purged_at.isoformat()}"
        if stone.purged_at is not None
        else "its bytes are not purged from the database's files yet"
    )
    error = Gone(
        f"conversation {stone.conversation_id!r} was forgotten at "
        f"{stone.forgotten_at.isoformat()}: {purged}"
    )
    error.details = stone.model_dump(mode="json")
    return error


def profile_json(profile: Profile, conversation_id: str) -> dict[str, Any]:
    return {**profile.model_dump(mode="json"), "conversation_id": conversation_id}


__all__ = ["Reads", "forgotten", "profile_json", "theirs", "zoned"]
