"""What the memory browser (``/ui``) reads beyond the API's operations: the conversations of a
tenant at a glance, a fact's whole story (versions, the decisions that made them, its source
episodes with their messages), and the browser's sessions."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row
from pydantic import BaseModel, Field

from slowwave import sql
from slowwave.models.errors import Forbidden, InvalidLimit
from slowwave.models.history import FactVersion
from slowwave.models.keys import ApiKey, Scope
from slowwave.models.tenant import DEFAULT_TENANT, SEPARATOR, check_tenant
from slowwave.service.caller import Caller
from slowwave.service.core import ServiceCore
from slowwave.service.reads import theirs
from slowwave.tasks.history import fact_history

MAX_PAGE = 200


class ConversationGlance(BaseModel):
    """One conversation as a list of them shows it."""

    tenant: str
    conversation_id: str
    episodes_pending: int
    episodes_consolidated: int
    episodes_quarantined: int
    facts_active: int
    last_message_at: datetime | None
    last_run_id: UUID | None


class ConversationPage(BaseModel):
    conversations: list[ConversationGlance]
    after: str | None = Field(description="Where the next page starts; None: this is the last.")


class Decision(BaseModel):
    """One entry of the decision log about a fact."""

    run_id: UUID | None
    chunk_id: UUID | None
    proposed_action: str
    action: str
    fact_id: UUID | None
    previous_fact_id: UUID | None
    similarity: float | None
    episode_ids: list[UUID]
    event_time: datetime
    recorded_at: datetime
    reason: str | None
    proposed_fact: str | None


class SourceEpisode(BaseModel):
    """An episode a fact cites, with its messages."""

    id: UUID
    start_at: datetime
    end_at: datetime
    pending: bool
    quarantined_at: datetime | None
    messages: list[dict[str, Any]]


class FactStory(BaseModel):
    """A fact's versions, the decisions that made them and the episodes they cite."""

    versions: list[FactVersion]
    decisions: list[Decision]
    sources: list[SourceEpisode]


class Session(BaseModel):
    """A signed-in browser: who it is and the token its forms carry."""

    caller_key: ApiKey | None
    form_token: str

    def caller(self) -> Caller:
        return Caller.of(self.caller_key) if self.caller_key else Caller.operator()


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class Browse(ServiceCore):
    def conversations(
        self,
        caller: Caller,
        *,
        prefix: str = "",
        after: str | None = None,
        limit: int = 50,
        tenant: str | None = None,
        every_tenant: bool = False,
    ) -> ConversationPage:
        """The caller's tenant's conversations in id order (those starting with ``prefix``),
        from ``after`` (a page's ``after``), each at a glance. The default tenant's admin may
        name another ``tenant``, or ask for ``every_tenant``."""
        caller.needs(Scope.read)
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidLimit(f"limit must be from 1 to {MAX_PAGE}")
        chosen = self.tenant_for(caller, tenant)
        if every_tenant and not self.reads_every_tenant(caller):
            raise Forbidden("only an admin key of the default tenant reads every tenant")
        start = "" if every_tenant else self._key_start(chosen, prefix)
        with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                sql.statement("conversations_list"),
                {
                    "lo": start,
                    "after": after,
                    "tenant": None if every_tenant else chosen,
                    "prefix": prefix,
                    "limit": limit + 1,
                },
                prepare=False,
            ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        return ConversationPage(
            conversations=[ConversationGlance.model_validate(r) for r in rows],
            after=rows[-1]["conversation_key"] if more else None,
        )

    @staticmethod
    def _key_start(tenant: str, prefix: str) -> str:
        return prefix if tenant == DEFAULT_TENANT else tenant + SEPARATOR + prefix

    @staticmethod
    def reads_every_tenant(caller: Caller) -> bool:
        """The default tenant's admin (a key, or the operator) sees every tenant."""
        return caller.tenant == DEFAULT_TENANT and caller.scope.allows(Scope.admin)

    def tenant_for(self, caller: Caller, tenant: str | None) -> str:
        """The tenant a call reads: the caller's own, or — for the default tenant's admin (or
        the operator) — the one it names. Another key naming another tenant is ``Forbidden``."""
        if tenant is None or tenant == caller.tenant:
            return caller.tenant
        if not self.reads_every_tenant(caller):
            raise Forbidden("only an admin key of the default tenant reads another tenant")
        return check_tenant(tenant)

    def as_tenant(self, caller: Caller, tenant: str | None) -> Caller:
        """``caller`` acting in ``tenant`` (``tenant_for``'s rule), with its own scope."""
        chosen = self.tenant_for(caller, tenant)
        if chosen == caller.tenant:
            return caller
        return Caller(chosen, caller.scope, caller.name)

    def fact_story(self, caller: Caller, fact_id: UUID | str) -> FactStory:
        """A fact's versions (``history``), the decisions of the log about any of them, and
        the episodes the versions cite, with their messages; another tenant's fact is none."""
        caller.needs(Scope.read)
        with self.connection() as conn:
            fact = self.resolve(conn, "fact", fact_id)
            versions = fact_history(conn, fact, tenant=caller.tenant)
            key = versions[0].conversation_id
            ids = [v.id for v in versions]
            sources = sorted({s for v in versions for s in v.source_episodic_ids})
            with conn.cursor(row_factory=dict_row) as cur:
                decisions = cur.execute(sql.statement("fact_decisions"), {"ids": ids}).fetchall()
                episodes = cur.execute(
                    sql.statement("episodes_by_id"), {"ids": sources, "conversation_id": key}
                ).fetchall()
        return FactStory(
            versions=[theirs(v) for v in versions],
            decisions=[Decision.model_validate(d) for d in decisions],
            sources=[SourceEpisode.model_validate(e) for e in episodes],
        )

    # ── the browser's sessions ─────────────────────────────────────────────────────────────

    def sign_in(self, key: ApiKey | None, ttl_s: int) -> tuple[str, str]:
        """A new session of ``key`` (None: the operator's, on a server without keys): the
        cookie's token (kept only as its SHA-256) and the session's form token."""
        token, form_token = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
        with self.connection() as conn, conn.transaction():
            conn.execute(
                sql.statement("ui_session_create"),
                {
                    "digest": _digest(token),
                    "key_id": key.id if key else None,
                    "form_token": form_token,
                    "ttl_s": ttl_s,
                },
            )
        return token, form_token

    def session(self, token: str) -> Session | None:
        """The live session ``token`` is, with its key (live too), or None."""
        if not token or len(token) > 200:
            return None
        with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            found = cur.execute(sql.statement("ui_session_read"), {"digest": _digest(token)})
            row = found.fetchone()
        if row is None:
            return None
        key = None
        if row["key_id"] is not None:
            fields = {k: v for k, v in row.items() if k not in {"form_token", "key_id"}}
            key = ApiKey.model_validate(fields)
        return Session(caller_key=key, form_token=row["form_token"])

    def sign_out(self, token: str) -> None:
        with self.connection() as conn:
            conn.execute(sql.statement("ui_session_delete"), {"digest": _digest(token)})


__all__ = [
    "Browse",
    "ConversationGlance",
    "ConversationPage",
    "Decision",
    "FactStory",
    "Session",
    "SourceEpisode",
]
