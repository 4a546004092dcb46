"""load: episodes into ``episodic_memory`` with COPY, idempotently (stable external keys)."""

from __future__ import annotations

from collections.abc import Iterable

import psycopg
from psycopg.types.json import Jsonb

import sql
from models.episode import Episode
from sql.copy import copy_rows

STAGED_EPISODE = (
    ("id", "uuid"),
    ("conversation_id", "text"),
    ("external_key", "text"),
    ("messages", "jsonb"),
    ("summary", "text"),
    ("surprise", "float4"),
    ("start_at", "timestamptz"),
    ("end_at", "timestamptz"),
)


def load_episodes(conn: psycopg.Connection, episodes: Iterable[Episode]) -> int:
    """Insert the episodes whose external key is new, in one transaction; return how many."""
    return load_episodes_counted(conn, episodes)[0]


def load_episodes_counted(conn: psycopg.Connection, episodes: Iterable[Episode]) -> tuple[int, int]:
    """Like ``load_episodes``; returns (episodes inserted, their messages)."""
    with conn.transaction():
        conn.execute(sql.statement("load_stage"))
        copy_rows(
            conn,
            "slowwave_staged_episodes",
            STAGED_EPISODE,
            (
                (
                    e.id,
                    e.conversation_id,
                    e.external_key,
                    Jsonb([m.model_dump(mode="json", exclude_none=True) for m in e.messages]),
                    e.summary,
                    e.surprise,
                    e.start_at,
                    e.end_at,
                )
                for e in episodes
            ),
        )
        counts = [int(r[0]) for r in conn.execute(sql.statement("load_insert")).fetchall()]
    return len(counts), sum(counts)
