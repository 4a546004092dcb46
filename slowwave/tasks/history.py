"""History you can read and undo: a fact's versions, a conversation's facts as of a time, and
undelete (seed 002's versions, lineage and soft delete with undelete)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import dict_row

from slowwave import sql
from slowwave.models.errors import HistoryError, UnknownFact
from slowwave.models.history import FactVersion
from slowwave.models.tenant import tenant_of


def _versions(rows: list[dict[str, Any]]) -> list[FactVersion]:
    return [FactVersion(**row, version=i) for i, row in enumerate(rows, start=1)]


def fact_history(
    conn: psycopg.Connection, fact_id: UUID, *, tenant: str | None = None
) -> list[FactVersion]:
    """Every version of the fact (lineage both ways), oldest first. With ``tenant``, a fact of
    another tenant's conversation is no fact (a chain never leaves its conversation)."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(sql.statement("fact_history"), {"id": fact_id}).fetchall()
    if not rows or (tenant is not None and tenant_of(rows[0]["conversation_id"]) != tenant):
        raise UnknownFact(f"no fact {fact_id}")
    return _versions(rows)


def get_version(
    conn: psycopg.Connection, fact_id: UUID, n: int, *, tenant: str | None = None
) -> FactVersion:
    """Version ``n`` (1 = the first) of the fact's chain, as seed 002 names it."""
    versions = fact_history(conn, fact_id, tenant=tenant)
    if not 1 <= n <= len(versions):
        raise HistoryError(f"fact {fact_id} has {len(versions)} version(s), not {n}")
    return versions[n - 1]


def list_facts(
    conn: psycopg.Connection,
    conversation_id: str,
    *,
    as_of: datetime | None = None,
    everything: bool = False,
) -> list[FactVersion]:
    """The conversation's active facts, those valid at ``as_of`` (event time), or with
    ``everything`` every fact it ever had; each with its place in its own chain."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            sql.statement("facts_list"),
            {"conversation_id": conversation_id, "as_of": as_of, "all": everything},
        ).fetchall()
    return [FactVersion(**row) for row in rows]


def undelete(conn: psycopg.Connection, fact_id: UUID, *, by: str, reason: str) -> list[UUID]:
    """Make an invalidated fact hold again; a successor that replaced it is ended where it
    began. Recorded in the decision log as ``undeleted``, with who asked and why. Returns the
    successors ended."""
    if not reason.strip():
        raise HistoryError("an undelete needs a reason (--reason)")
    with conn.transaction():
        row = conn.execute(
            sql.statement("fact_undelete"), {"id": fact_id, "reason": f"{by}: {reason}"}
        ).fetchone()
        if row is None:
            fact_history(conn, fact_id)  # no such fact: says so
            raise HistoryError(f"fact {fact_id} is active: there is nothing to undelete")
    return list(row[1] or [])
