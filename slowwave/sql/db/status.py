"""What is in the database: episodes pending / consolidated / quarantined, facts active /
invalidated, in total and per conversation; the backlog per tenant."""

from __future__ import annotations

from datetime import datetime

import psycopg
from psycopg.rows import dict_row
from pydantic import BaseModel, Field

from slowwave import sql
from slowwave.sql.db.migrate import applied_versions, schema_embedding_dim

COUNTS = (
    "episodes_pending",
    "episodes_consolidated",
    "episodes_quarantined",
    "facts_active",
    "facts_invalidated",
    "facts_active_chars",
    "facts_active_tokens",
)


class ConversationStatus(BaseModel):
    conversation_id: str
    episodes_pending: int = 0
    episodes_consolidated: int = 0
    episodes_quarantined: int = 0
    facts_active: int = 0
    facts_invalidated: int = 0
    facts_active_chars: int = Field(default=0, description="Characters of the active facts.")
    facts_active_tokens: int = Field(
        default=0, description="Estimated tokens of the active facts (four characters a token)."
    )


class Backlog(BaseModel):
    """One tenant's episodes waiting for a run, and since when the oldest has waited."""

    tenant: str
    episodes_pending: int
    oldest_pending_at: datetime = Field(description="When the oldest of them was recorded.")


def read_backlog(conn: psycopg.Connection) -> list[Backlog]:
    """Per tenant (those with any), the episodes pending and the oldest one's recording."""
    with conn.cursor(row_factory=dict_row) as cur:
        return [Backlog(**r) for r in cur.execute(sql.statement("backlog"))]


class DatabaseStatus(BaseModel):
    where: str = Field(description="The server in use, without secrets.")
    migrations_applied: int
    migrations_pending: int
    embedding_dim: int | None
    totals: ConversationStatus
    backlog: list[Backlog] = Field(
        default_factory=list, description="Per tenant: episodes pending, since when."
    )
    conversations: list[ConversationStatus] | None = Field(
        default=None, description="Per-conversation counts, when asked for."
    )


def read_status(
    conn: psycopg.Connection, where: str, *, per_conversation: bool = False
) -> DatabaseStatus:
    done = applied_versions(conn)
    pending = len([m for m in sql.migrations() if m.version not in done])
    rows: list[ConversationStatus] = []
    backlog: list[Backlog] = []
    if schema_embedding_dim(conn) is not None:
        with conn.cursor(row_factory=dict_row) as cur:
            rows = [ConversationStatus(**r) for r in cur.execute(sql.statement("status"))]
        backlog = read_backlog(conn)
    totals = ConversationStatus(
        conversation_id="*",
        **{key: sum(getattr(r, key) for r in rows) for key in COUNTS},
    )
    return DatabaseStatus(
        where=where,
        migrations_applied=len(done),
        migrations_pending=pending,
        embedding_dim=schema_embedding_dim(conn),
        totals=totals,
        backlog=backlog,
        conversations=rows if per_conversation else None,
    )
