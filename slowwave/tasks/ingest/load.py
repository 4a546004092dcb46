"""load: episodes into ``episodic_memory`` with COPY, idempotently (stable external keys).

A forgotten conversation stays forgotten: its episodes are refused (``refuse_forgotten``),
unless the caller allows them back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import psycopg
from psycopg.types.json import Jsonb

from slowwave import sql
from slowwave.models.episode import Episode
from slowwave.sql.copy import copy_rows
from slowwave.tasks.forget import hold_conversations

FORGOTTEN = (
    "conversation forgotten (a tombstone holds its id's SHA-256): refused, so that a forget "
    "stays done; --allow-forgotten ingests it again"
)

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


def load_episodes(
    conn: psycopg.Connection, episodes: Iterable[Episode], *, allow_forgotten: bool = False
) -> int:
    """Insert the episodes whose external key is new, in one transaction; return how many.
    Episodes of forgotten conversations are refused unless ``allow_forgotten``."""
    return load_episodes_counted(conn, episodes, allow_forgotten=allow_forgotten)[0]


def refuse_forgotten(
    conn: psycopg.Connection,
    staged: str | list[str],
    refuse: str,
    allow_forgotten: bool,
    *,
    exclusive: bool = False,
) -> list[tuple[object, ...]]:
    """Inside the loading transaction, once the rows are staged and before any is written:
    hold their conversations against a forget (``staged``: their ids, or the statement that
    reads them; ``exclusive``: against other ingests of them too), and take the rows of
    forgotten ones out of the staging table (statement ``refuse``: what was taken), unless
    ``allow_forgotten``."""
    conversations = (
        staged
        if isinstance(staged, list)
        else [r[0] for r in conn.execute(sql.statement(staged)).fetchall()]
    )
    forgotten = hold_conversations(conn, conversations, exclusive=exclusive)
    if not forgotten or allow_forgotten:
        return []
    return list(
        conn.execute(sql.statement(refuse), {"conversations": sorted(forgotten)}).fetchall()
    )


def load_episodes_counted(
    conn: psycopg.Connection,
    episodes: Iterable[Episode],
    *,
    allow_forgotten: bool = False,
    on_refused: Callable[[str, int], None] | None = None,
) -> tuple[int, int]:
    """Like ``load_episodes``; returns (episodes inserted, their messages). ``on_refused``
    hears of each forgotten conversation refused, with its messages."""
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
        refused = refuse_forgotten(conn, "load_conversations", "load_refuse", allow_forgotten)
        for conversation, messages in refused:
            if on_refused is not None:
                on_refused(str(conversation), int(str(messages)))
        counts = [int(r[0]) for r in conn.execute(sql.statement("load_insert")).fetchall()]
    return len(counts), sum(counts)
