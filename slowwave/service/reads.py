"""The reads: search, context, facts, a fact's history, a profile, a conversation's status."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

from psycopg.rows import dict_row
from pydantic import TypeAdapter, ValidationError

from slowwave import sql
from slowwave.models.category import Category
from slowwave.models.errors import (
    Gone,
    InvalidBudget,
    InvalidK,
    InvalidRequest,
    NoProfile,
    NotFound,
)
from slowwave.models.history import FactVersion
from slowwave.models.keys import Scope
from slowwave.models.llm.tokens import average_tokens
from slowwave.models.tenant import DEFAULT_TENANT, conversation_of
from slowwave.service.answers import (
    ContextAnswer,
    Hit,
    RunState,
    SearchAnswer,
    Status,
    Tombstone,
    fuse,
)
from slowwave.service.caller import Caller
from slowwave.service.core import Served, ServiceCore, not_found
from slowwave.tasks.history import fact_history, get_version, list_facts
from slowwave.tasks.ids import IdKind, shorten
from slowwave.tasks.memories import latest_memories, render_memories, search_memories
from slowwave.tasks.profile import Profile, read_profile
from slowwave.tasks.rerank import rerank as rerank_hits
from slowwave.tasks.runs import show_run
from slowwave.tasks.search import (
    Ranker,
    check_query,
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


_MOMENT = TypeAdapter(datetime)


def moment(text: str) -> datetime:
    """An event time typed as text, read as REST and MCP read theirs (pydantic's ISO 8601): a
    bare date is its first moment, and one without a zone is UTC."""
    try:
        at = _MOMENT.validate_python(text.strip())
    except ValidationError:
        raise InvalidRequest(f"not a date or a time (ISO 8601): {text!r}") from None
    return zoned(at)  # type: ignore[return-value]  # given a time, zoned gives one back


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
        memories: int | None = None,
        memory_tokens: int | None = None,
        fused: bool = False,
        rerank: bool | None = None,
    ) -> SearchAnswer:
        """The top ``k`` facts for ``query``: active ones, or those valid at ``as_of`` (event
        time); beside them the ``memories`` episodes (pending or consolidated, begun by
        ``as_of``) whose messages answer it best, each cut to ``memory_tokens`` (both: the
        settings' when not given). ``fused``: also one list of both, best first, ``k`` long.
        ``rerank`` (the settings' when not given): the best candidates of both lists put in
        the order the reranker scores them (``SLOWWAVE_SEARCH_RERANK_CANDIDATES`` of each read).
        The facts served are recorded as retrieved, the episodes reviewed (FSRS). ``output``:
        ``markdown`` adds the block an agent's prompt takes (``split``: guidelines apart)."""
        caller.needs(Scope.read)
        key = caller.key(conversation_id)
        check_query(
            query, k, max_k=self.settings.serve.max_k, max_chars=self.settings.serve.max_query_chars
        )
        memories, memory_tokens = self._check_memories(memories, memory_tokens)
        if rerank is None:
            rerank = self.settings.search.rerank
        depth = self.settings.search.rerank_candidates if rerank else 0
        vector = self.embed_query(query) if ranker != "fulltext" else None
        with self.connection() as conn:
            found = search(
                conn,
                self.embedder,
                query,
                key,
                max(k, depth),
                category=category,
                as_of=zoned(as_of),
                ranker=ranker,
                policy=self.search_settings,
                vector=vector,
            )
            if memories:
                self.embed_new_windows(conn, key)
            said = search_memories(
                conn,
                self.embedder,
                query,
                key,
                k=max(memories, depth) if memories else 0,
                memory_tokens=memory_tokens,
                as_of=zoned(as_of),
                policy=self.search_settings,
                vector=vector,
                embed_first=False,  # embed_new_windows, above
            )
            if not found and not said:
                self.require(conn, key, conversation_id)
            reranking = rerank and bool(found or said)  # the model loads for something to rank
            if not reranking:
                self.served(Served(tuple(h.id for h in found), tuple(m.id for m in said)), conn)
        scores = None
        if reranking:  # with no connection held: the model takes up to a second
            reranked = rerank_hits(self.reranker, query, found, said, k=k, memories_k=memories)
            found, said, scores = reranked.facts, reranked.memories, reranked.scores
            with self.connection() as conn:
                self.served(Served(tuple(h.id for h in found), tuple(m.id for m in said)), conn)
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
                }
                # a reranked search adds the reranker's place, as its memories' ranks do
                | ({} if h.rerank_rank is None else {"rerank": h.rerank_rank}),
            )
            for h in found
        ]
        said = [m.model_copy(update={"conversation_id": conversation_id}) for m in said]
        cited = [(h.id, h.source_episodic_ids) for h in found]
        markdown = {"json": None, "markdown": render_markdown, "split": render_split}[output]
        return SearchAnswer(
            conversation_id=conversation_id,
            query=query,
            hits=hits,
            memories=said,
            ranked=fuse(cited, said, k, self.search_settings.rrf_k, scores) if fused else None,
            markdown=(
                "\n\n".join(filter(None, (markdown(found), render_memories(said))))
                if markdown is not None
                else None
            ),
        )

    def context(
        self,
        caller: Caller,
        conversation_id: str,
        budget_tokens: int = 500,
        *,
        as_of: datetime | None = None,
        memories: int = 0,
    ) -> ContextAnswer:
        """Guidelines and the top identity / preference facts, packed into a token budget
        (seed 001's ``context_pre_retrieve``: facts only, nothing reviewed); ``memories``: the
        last messages of that many latest episodes in the room the facts leave."""
        caller.needs(Scope.read)
        key = caller.key(conversation_id)
        if not 1 <= budget_tokens <= MAX_CONTEXT_TOKENS:
            raise InvalidBudget(f"budget_tokens must be from 1 to {MAX_CONTEXT_TOKENS}")
        if not 0 <= memories <= self.settings.serve.max_k:
            raise InvalidK(f"memories must be from 0 to {self.settings.serve.max_k}")
        with self.connection() as conn:
            block = context(conn, key, budget_tokens, as_of=zoned(as_of))
            room = budget_tokens - (average_tokens(block) + 2 if block else 0)
            recent = latest_memories(conn, key, memories, room, as_of=zoned(as_of))
            if not block and not recent:
                self.require(conn, key, conversation_id)
        return ContextAnswer(
            conversation_id=conversation_id, context="\n\n".join(filter(None, (block, recent)))
        )

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
                raise NoProfile(
                    f"conversation {conversation_id!r} has no profile yet: runs write them "
                    "with SLOWWAVE_PROFILES=true"
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

    def run_state(self, caller: Caller, run_id: UUID) -> RunState:
        """A run the caller's tenant asked for (``consolidate_now``): queued, running or how it
        ended, with what it committed. The default tenant's admin keys see every run; any
        other key sees its tenant's, and of another run what a run that does not exist shows."""
        caller.needs(Scope.read)
        everyone = caller.tenant == DEFAULT_TENANT and caller.scope.allows(Scope.admin)
        with self.connection() as conn:
            row = show_run(conn, run_id)
        if row is not None and (everyone or row["requested_by_tenant"] == caller.tenant):
            return RunState.model_validate({**row, "run_id": row["id"]})
        asker = self.queued.get(run_id) if row is None else None
        if asker is not None and (everyone or asker == caller.tenant):
            return RunState(
                run_id=run_id, kind="now", status="queued", started_at=None, finished_at=None
            )
        raise NotFound(f"no run {run_id}")

    def _check_memories(self, memories: int | None, tokens: int | None) -> tuple[int, int]:
        """How many episodic memories and how many tokens of each: the call's, or the
        settings'; within what a server allows (``serve.max_k``, ``MAX_CONTEXT_TOKENS``)."""
        memories = self.search_settings.memories if memories is None else memories
        tokens = self.search_settings.memory_tokens if tokens is None else tokens
        if not 0 <= memories <= self.settings.serve.max_k:
            raise InvalidK(f"memories must be from 0 to {self.settings.serve.max_k}")
        if not 16 <= tokens <= MAX_CONTEXT_TOKENS:
            raise InvalidBudget(f"memory_tokens must be from 16 to {MAX_CONTEXT_TOKENS}")
        return memories, tokens


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


__all__ = ["Reads", "forgotten", "moment", "profile_json", "theirs", "zoned"]
