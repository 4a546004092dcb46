"""What the operations answer: the same typed records to Python, the CLI, REST and MCP."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field

from slowwave.models.category import Category
from slowwave.models.keys import ApiKey


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


class ContextAnswer(BaseModel):
    conversation_id: str
    context: str


class Status(BaseModel):
    conversation_id: str
    episodes_pending: int
    episodes_consolidated: int
    episodes_quarantined: int
    last_consolidated_at: datetime | None
    last_message_at: datetime | None
    facts_active: int
    facts_invalidated: int


PurgeState = Literal["done", "queued", "skipped", "incomplete"]


class Forgotten(BaseModel):
    """What a forget removed, and whether the bytes are gone from the database's files yet."""

    kind: Literal["forget_conversation", "forget_fact"]
    target_sha256: str = Field(description="The SHA-256 of what was forgotten (the tombstone).")
    rows: dict[str, int] = Field(description="Rows removed, per table.")
    reject_lines: int = Field(description="Lines removed from the rejects reports.")
    purge: PurgeState = Field(
        description="done: the tables were rewritten and the write-ahead log moved on before "
        "this answer; queued: they will be, right after it (GET the conversation to see when); "
        "skipped: purge=false was asked; incomplete: see purge_note."
    )
    purge_note: str | None = None
    export_files: int = Field(description="Parquet files of slowwave's exports rewritten.")
    export_notes: int = Field(description="Exports that could not be reached (the log names them).")


class Tombstone(BaseModel):
    """A conversation that was forgotten: when, and whether its bytes are purged yet."""

    conversation_id: str
    forgotten_at: datetime
    purged: bool
    purged_at: datetime | None


class Undeleted(BaseModel):
    """A fact that holds again, and the successors that replaced it, ended where it began."""

    fact_id: UUID
    successors_ended: list[UUID]


class NewKey(BaseModel):
    key: str = Field(description="Shown this once: only its SHA-256 is kept.")
    record: ApiKey


__all__ = [
    "ContextAnswer",
    "Forgotten",
    "Hit",
    "NewKey",
    "PurgeState",
    "Recorded",
    "Rejected",
    "SearchAnswer",
    "Status",
    "Tombstone",
    "Undeleted",
]
