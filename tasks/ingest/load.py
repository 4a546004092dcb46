"""load: episodes into ``episodic_memory`` with COPY, idempotently (stable external keys)."""

from __future__ import annotations

from collections.abc import Iterable

import psycopg
from psycopg.types.json import Jsonb

import sql
from models.episode import Episode

_TYPES = ["uuid", "text", "text", "jsonb", "text", "float4", "timestamptz", "timestamptz"]


def load_episodes(conn: psycopg.Connection, episodes: Iterable[Episode]) -> int:
    """Insert the episodes whose external key is new, in one transaction; return how many."""
    return load_episodes_counted(conn, episodes)[0]


def load_episodes_counted(conn: psycopg.Connection, episodes: Iterable[Episode]) -> tuple[int, int]:
    """Like ``load_episodes``; returns (episodes inserted, their messages)."""
    with conn.transaction():
        conn.execute(sql.statement("load_stage"))
        with conn.cursor().copy(
            "COPY slowwave_staged_episodes (id, conversation_id, external_key, messages, "
            "summary, surprise, start_at, end_at) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(_TYPES)
            for e in episodes:
                copy.write_row(
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
                )
        counts = [int(r[0]) for r in conn.execute(sql.statement("load_insert")).fetchall()]
    return len(counts), sum(counts)
