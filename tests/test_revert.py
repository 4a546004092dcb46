"""Revert a run: every table back to its exact content before the run, and a rerun makes the
same facts; a run later runs built on is refused unless the revert cascades."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from models.embedding.base import Embedder
from models.llm.replay import LoCoMoReplayModel
from models.settings import Settings
from sql.db import Database
from tasks.consolidate import consolidate
from tasks.ingest.load import load_episodes
from tasks.ingest.transcripts import IngestPolicy, ingest
from tasks.revert import RevertRefused, revert_run
from tests.fix_episodes import with_settings
from tests.reliability.fix_commands import CommandModel, HashEmbedder, said

TABLES = {
    "episodic_memory": "id",
    "ingested_messages": "conversation_id, message_id",
    "semantic_memory": "id",
    "decision_log": "id",
    "consolidation_chunks": "id",
    "consolidation_runs": "id",
}


def tables(conn: psycopg.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table slowwave writes, whole."""
    return {
        name: conn.execute(f"SELECT * FROM {name} ORDER BY {key}").fetchall()  # type: ignore[arg-type]
        for name, key in TABLES.items()
    }


def facts(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return sorted(
        conn.execute(
            "SELECT conversation_id, category, fact, keywords, valid_at, invalid_at "
            "FROM semantic_memory"
        ).fetchall()
    )


def test_reverting_a_locomo_backfill_restores_every_table_and_a_rerun_makes_the_same_facts(
    db: Database,
    conn: psycopg.Connection,
    settings: Settings,
    embedder: Embedder,
    locomo_path: Path,
) -> None:
    ingest(db, locomo_path, IngestPolicy.of(settings))
    before = tables(conn)
    model = LoCoMoReplayModel(locomo_path)
    run = consolidate(db, model, embedder, settings, kind="backfill")
    assert run.facts_inserted > 1000
    made = facts(conn)

    report = revert_run(conn, run.run_id, by="ops", reason="prompt bug")
    assert report.runs == [run.run_id] and report.facts_removed == len(made)
    assert report.episodes_pending == run.episodes_consolidated
    assert tables(conn) == before
    (operation,) = conn.execute("SELECT kind, target, done_by FROM history_operations").fetchall()
    assert operation == ("revert", str(run.run_id), "ops")

    consolidate(db, model, embedder, settings, kind="backfill")
    assert facts(conn) == made


def test_a_revert_that_later_runs_built_on_is_refused_then_cascades_newest_first(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    settings = with_settings(settings, chunk_size=2)
    load_episodes(
        conn,
        said(
            "ana",
            "remember: Ana lives in Riga with her sister.",
            "remember: Ana studies marine biology.",
        ),
    )
    conn.commit()
    before = tables(conn)
    first = consolidate(db, CommandModel(), HashEmbedder(), settings, kind="backfill")
    later_episodes = said(
        "ana",
        "again: Ana lives in Riga with her sister.",
        "now: Ana studies marine biology. => Ana works at the aquarium.",
        day=1,
    )
    load_episodes(conn, later_episodes)
    conn.commit()
    loaded = {r[0]: r for r in tables(conn)["episodic_memory"]}
    second = consolidate(db, CommandModel(), HashEmbedder(), settings, kind="backfill")
    assert second.facts_reinforced == 1 and second.facts_updated == 1

    with pytest.raises(RevertRefused, match=f"built on by 1 later run\\(s\\) \\({second.run_id}"):
        revert_run(conn, first.run_id, by="ops", reason="bad night")
    assert len(facts(conn)) == 3  # nothing changed

    report = revert_run(conn, first.run_id, by="ops", reason="bad night", cascade=True)
    assert report.runs == [second.run_id, first.run_id]
    after = tables(conn)
    assert after["episodic_memory"] == sorted(
        [*before["episodic_memory"], *(loaded[e.id] for e in later_episodes)]
    )
    assert {k: v for k, v in after.items() if k != "episodic_memory"} == {
        k: v for k, v in before.items() if k != "episodic_memory"
    }


def test_reverting_only_the_latest_run_restores_what_it_ended_and_the_evidence_it_added(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    settings = with_settings(settings, chunk_size=2)
    load_episodes(conn, said("ana", "remember: Ana lives in Riga with her sister."))
    conn.commit()
    consolidate(db, CommandModel(), HashEmbedder(), settings, kind="backfill")
    between = tables(conn)
    load_episodes(
        conn,
        said(
            "ana",
            "again: Ana lives in Riga with her sister.",
            "drop: Ana lives in Riga with her sister.",
            day=1,
        ),
    )
    conn.commit()
    loaded = tables(conn)["episodic_memory"]
    one_a_chunk = with_settings(settings, chunk_size=1)  # reinforced, then ended
    second = consolidate(db, CommandModel(), HashEmbedder(), one_a_chunk, kind="backfill")
    assert (second.facts_reinforced, second.facts_invalidated) == (1, 1)

    report = revert_run(conn, second.run_id, by="ops", reason="wrong")
    assert (report.facts_restored, report.facts_evidence_removed) == (1, 1)
    after = tables(conn)
    assert after["semantic_memory"] == between["semantic_memory"]
    assert after["episodic_memory"] == loaded


def test_reverting_a_run_that_only_failed_a_chunk_takes_back_its_charge_not_a_later_runs_work(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    from tests.reliability.fix_faults import FaultyModel

    load_episodes(
        conn,
        said("ana", "remember: Ana lives in Riga with her sister.", "fault: malformed"),
    )
    conn.commit()
    failed = consolidate(db, FaultyModel(), HashEmbedder(), settings, kind="backfill")
    assert failed.chunks_failed == 1
    later = consolidate(db, CommandModel(), HashEmbedder(), settings, kind="backfill")
    assert later.episodes_consolidated == 2
    done = tables(conn)

    revert_run(conn, failed.run_id, by="ops", reason="retry budget")

    after = tables(conn)
    assert after["semantic_memory"] == done["semantic_memory"]
    episodes = conn.execute(
        "SELECT consolidated_at IS NOT NULL, consolidation_run_id, attempts, last_error "
        "FROM episodic_memory"
    ).fetchall()
    assert episodes == [(True, later.run_id, 0, None)] * 2
