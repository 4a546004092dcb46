"""A model that misbehaves in every way the issue lists, injected per chunk: each fault is
handled as documented, recorded with its reason, and the rest of the run completes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from slowwave.models.errors import RuntimeUnreachable
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.load import load_episodes
from tests.fix_episodes import with_settings
from tests.reliability.fix_commands import (
    START,
    CommandModel,
    HashEmbedder,
    said,
    story_episodes,
)
from tests.reliability.fix_faults import FaultyModel
from tests.reliability.fix_outcome import broken_invariants, duplicate_facts, lost_episodes

KNOWN = [
    "remember: Ivo repairs old bicycles in his garage.",
    "remember: Ivo speaks Croatian and German fluently.",
    "remember: Ivo volunteers at the animal shelter.",
]


def facts_of(conn: psycopg.Connection, conversation: str) -> dict[str, bool]:
    """Fact → active."""
    return dict(
        conn.execute(
            "SELECT fact, invalid_at IS NULL FROM semantic_memory WHERE conversation_id = %s",
            (conversation,),
        ).fetchall()
    )


def victim_state(conn: psycopg.Connection) -> tuple[Any, ...]:
    row = conn.execute(
        "SELECT consolidated_at IS NOT NULL, attempts, last_error FROM episodic_memory "
        "WHERE conversation_id = 'ivo' AND start_at >= %s",
        (START + timedelta(days=1),),
    ).fetchone()
    assert row is not None
    return tuple(row)


def reasons(conn: psycopg.Connection, action: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT reason FROM decision_log WHERE conversation_id = 'ivo' AND action = %s "
            "AND reason IS NOT NULL ORDER BY id",
            (action,),
        ).fetchall()
    ]


@pytest.fixture
def fault_settings(settings: Settings) -> Settings:
    return with_settings(settings, chunk_size=4)


def run_with(db: Database, settings: Settings, fault: str, arg: str = "") -> None:
    """Ivo's known facts and two healthy conversations first, then the fault in a chunk of
    Ivo's while the healthy conversations go on in the same run."""
    with db.connection() as conn:
        load_episodes(conn, said("ivo", *KNOWN, day=0))
    consolidate(db, CommandModel(), HashEmbedder(), settings, kind="backfill")
    with db.connection() as conn:
        load_episodes(conn, said("ivo", f"fault: {fault} {arg}".strip(), day=1))
        load_episodes(conn, story_episodes(2, start=START + timedelta(days=2)))
    consolidate(db, FaultyModel(), HashEmbedder(), settings, kind="backfill")


def healthy_done(conn: psycopg.Connection) -> bool:
    (pending,) = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE conversation_id <> 'ivo' "
        "AND consolidated_at IS NULL"
    ).fetchone()  # type: ignore[misc]
    return pending == 0 and duplicate_facts(conn) == 0


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("timeout", "model call failed: ReadTimeout: timed out after 120 s"),
        ("malformed", "model answer is not a valid consolidation output"),
        ("truncated", "model answer is not a valid consolidation output"),
        ("empty", "model answer is not a valid consolidation output"),
    ],
)
def test_an_unusable_answer_fails_its_chunk_with_the_reason_and_the_run_goes_on(
    db: Database, conn: psycopg.Connection, fault_settings: Settings, fault: str, reason: str
) -> None:
    run_with(db, fault_settings, fault)
    consolidated, attempts, error = victim_state(conn)
    assert (consolidated, attempts) == (False, 1) and error.startswith(reason), error
    assert all(facts_of(conn, "ivo").values()) and len(facts_of(conn, "ivo")) == 3
    assert healthy_done(conn)
    (status, chunk_error) = conn.execute(
        "SELECT status, error FROM consolidation_chunks WHERE conversation_id = 'ivo' "
        "ORDER BY recorded_at DESC LIMIT 1"
    ).fetchone()  # type: ignore[misc]
    assert status == "failed" and chunk_error == error


def test_unknown_ids_become_new_facts_or_are_dropped_with_the_reason(
    db: Database, conn: psycopg.Connection, fault_settings: Settings
) -> None:
    run_with(db, fault_settings, "unknown_ids")
    assert victim_state(conn)[:2] == (True, 0)
    assert facts_of(conn, "ivo")["Ivo rides to work daily."] is True
    assert "Ivo no longer volunteers." not in facts_of(conn, "ivo")
    assert sum(facts_of(conn, "ivo").values()) == 4
    assert reasons(conn, "new") == ["reinforce of unknown fact id 'F99' treated as new"]
    assert reasons(conn, "rejected") == ["invalidate of unknown fact id 'F77' dropped"]
    assert healthy_done(conn)


def test_an_id_of_another_conversations_fact_touches_nothing(
    db: Database, conn: psycopg.Connection, fault_settings: Settings
) -> None:
    load_episodes(conn, said("bystander", "remember: Zoe grows tomatoes on her balcony.", day=0))
    conn.commit()
    consolidate(db, CommandModel(), HashEmbedder(), fault_settings, kind="backfill")
    (theirs,) = conn.execute(
        "SELECT id FROM semantic_memory WHERE conversation_id = 'bystander'"
    ).fetchone()  # type: ignore[misc]
    run_with(db, fault_settings, "other_conversation", str(theirs))
    assert facts_of(conn, "bystander") == {"Zoe grows tomatoes on her balcony.": True}
    assert all(facts_of(conn, "ivo").values())
    assert reasons(conn, "rejected") == [f"invalidate of unknown fact id {str(theirs)!r} dropped"]
    assert healthy_done(conn)


def test_an_invalid_category_rejects_that_item_only(
    db: Database, conn: psycopg.Connection, fault_settings: Settings
) -> None:
    run_with(db, fault_settings, "invalid_category")
    assert victim_state(conn)[:2] == (True, 0)
    assert "Ivo rides to work daily." in facts_of(conn, "ivo")
    assert reasons(conn, "rejected") == ["unknown category 'astrology'"]
    assert healthy_done(conn)


def test_an_oversized_answer_is_capped_and_an_overlong_fact_rejected(
    db: Database, conn: psycopg.Connection, fault_settings: Settings
) -> None:
    # the serial numbers are said nowhere: grounding off, so that the cap is what is measured
    run_with(db, with_settings(fault_settings, grounding="off"), "oversized")
    assert victim_state(conn)[:2] == (True, 0)
    (written,) = conn.execute(
        "SELECT count(*) FROM decision_log WHERE conversation_id = 'ivo' "
        "AND action IN ('new', 'merge') AND event_time >= %s",
        (START + timedelta(days=1),),
    ).fetchone()  # type: ignore[misc]
    assert written == 100  # the cap: each written as new or merged into a near duplicate
    rejected = reasons(conn, "rejected")
    assert rejected.count("over the facts-per-answer cap") == 51
    assert healthy_done(conn)


def test_conflicting_actions_on_one_fact_keep_the_update_and_log_the_others(
    db: Database, conn: psycopg.Connection, fault_settings: Settings
) -> None:
    run_with(db, fault_settings, "conflicting")
    facts = facts_of(conn, "ivo")
    assert facts["Ivo repairs old motorbikes in his garage."] is True
    assert sum(facts.values()) == 3  # one fact replaced, none lost, none added
    rejected = reasons(conn, "rejected")
    assert len(rejected) == 2 and all("overridden by update" in r for r in rejected), rejected
    assert healthy_done(conn)


def test_an_engine_that_dies_mid_batch_charges_nothing_and_a_rerun_finishes(
    db: Database, conn: psycopg.Connection, fault_settings: Settings
) -> None:
    with pytest.raises(RuntimeUnreachable):
        run_with(db, fault_settings, "engine_dies")
    (status, error) = conn.execute(
        "SELECT status, error FROM consolidation_runs ORDER BY started_at DESC LIMIT 1"
    ).fetchone()  # type: ignore[misc]
    assert status == "failed" and "engine died" in error
    (charged,) = conn.execute("SELECT count(*) FROM episodic_memory WHERE attempts > 0").fetchone()  # type: ignore[misc]
    assert charged == 0

    with db.connection() as c:  # the engine is back (the fault message is answered normally)
        c.execute(
            "UPDATE episodic_memory SET messages = jsonb_build_array(jsonb_build_object("
            "'speaker', 'user', 'text', 'remember: Ivo bought a cargo bike.')) "
            "WHERE messages->0->>'text' LIKE 'fault:%%'"
        )
    consolidate(db, FaultyModel(), HashEmbedder(), fault_settings, kind="backfill")
    assert lost_episodes(conn) == 0 and broken_invariants(conn) == {}
    assert facts_of(conn, "ivo")["Ivo bought a cargo bike."] is True
