"""Building episodes and reading outcomes back from the database."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from slowwave.models.consolidation import render_message_line
from slowwave.models.episode import Episode, Message
from slowwave.models.ids import new_id
from slowwave.models.settings import Settings
from slowwave.tasks.ingest.load import load_episodes


def at(year: int, month: int, day: int, hour: int = 12) -> datetime:
    return datetime(year, month, day, hour, tzinfo=UTC)


def make_episode(
    conversation: str,
    key: str,
    text: str,
    when: datetime,
    *,
    surprise: float | None = 0.5,
    speaker: str = "user",
) -> Episode:
    return Episode(
        id=new_id(),
        conversation_id=conversation,
        external_key=key,
        messages=[Message(speaker=speaker, text=text)],
        summary=None,
        surprise=surprise,
        start_at=when,
        end_at=when,
    )


# Each message line a test stored, as the prompt shows it → its episode's external key: how
# the scripted model double recognises, from the prompt alone, which episodes it is shown.
KEYS_BY_LINE: dict[str, str] = {}


def add(conn: psycopg.Connection, *episodes: Episode) -> list[Episode]:
    load_episodes(conn, episodes)
    for episode in episodes:
        for message in episode.messages:
            line = render_message_line(message)
            bound = KEYS_BY_LINE.setdefault(line, episode.external_key)
            assert bound == episode.external_key, f"{line!r} is already {bound}'s: make it unique"
    return list(episodes)


def with_settings(settings: Settings, **overrides: Any) -> Settings:
    values = {**settings.model_dump(), **overrides}
    return Settings(**values, _env_file=None)


def facts(conn: psycopg.Connection, conversation: str | None = None) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT id, conversation_id, category, fact, keywords, source_episodic_ids, valid_at, "
            "invalid_at, supersedes_id FROM semantic_memory "
            "WHERE %(c)s::text IS NULL OR conversation_id = %(c)s ORDER BY created_at, fact",
            {"c": conversation},
        ).fetchall()


def active(conn: psycopg.Connection, conversation: str | None = None) -> dict[str, dict[str, Any]]:
    return {f["fact"]: f for f in facts(conn, conversation) if f["invalid_at"] is None}


def episodes_state(conn: psycopg.Connection) -> dict[str, dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            "SELECT external_key, id, consolidated_at, attempts, last_error, quarantined_at, "
            "gated, claimed_by, coalesce(surprise, novelty) AS surprise, novelty "
            "FROM episodic_memory"
        ).fetchall()
    return {r["external_key"]: r for r in rows}


def decisions(conn: psycopg.Connection) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM decision_log ORDER BY id").fetchall()


def consolidated_once(conn: psycopg.Connection) -> tuple[int, int]:
    """(episodes still pending, episodes applied by more than one chunk): (0, 0) when every
    episode was consolidated exactly once."""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM episodic_memory WHERE consolidated_at IS NULL), "
        "(SELECT count(*) FROM (SELECT episode_id FROM consolidation_chunks c, "
        "unnest(c.episode_ids) AS episode_id WHERE status = 'applied' "
        "GROUP BY episode_id HAVING count(*) > 1) twice)"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])
