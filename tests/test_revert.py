"""Revert a run: every table back to its exact content before the run, and a rerun makes the
same facts; a run later runs built on is refused unless the revert cascades."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from slowwave.models.embedding.base import Embedder
from slowwave.models.llm.replay import LoCoMoReplayModel
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.load import load_episodes
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.transcripts import ingest
from slowwave.tasks.revert import RevertRefused, revert_run
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
        name: conn.execute(f"SELECT * FROM {name} ORDER BY {key}").fetchall()
        for name, key in TABLES.items()
    }


def facts(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return sorted(
        conn.execute(
            "SELECT conversation_id, category, fact, keywords, valid_at, invalid_at "
            "FROM semantic_memory"
        ).fetchall()
    )


@pytest.mark.slow
def test_reverting_a_locomo_backfill_restores_every_table_and_a_rerun_makes_the_same_facts(
    db: Database,
    conn: psycopg.Connection,
    settings: Settings,
    embedder: Embedder,
    locomo_one_path: Path,
) -> None:
    ingest(db, locomo_one_path, IngestPolicy.of(settings))
    before = tables(conn)
    model = LoCoMoReplayModel(locomo_one_path)
    run = consolidate(db, model, embedder, settings, kind="backfill")
    assert run.facts_inserted > 100 and run.episodes_consolidated == 19
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


def _day(db: Database, conn: psycopg.Connection, settings: Settings, *episodes: Any) -> Any:
    load_episodes(conn, [e for group in episodes for e in group])
    conn.commit()
    return consolidate(db, CommandModel(), HashEmbedder(), settings, kind="backfill")


def test_a_cascade_follows_every_run_built_on_the_reverted_ones(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    s = with_settings(settings, chunk_size=2)
    a = _day(db, conn, s, said("x", "remember: Xia plays the cello in a quartet."))
    b = _day(
        db,
        conn,
        s,
        said("x", "again: Xia plays the cello in a quartet.", day=1),
        said("y", "remember: Yan grows tomatoes on the roof.", day=1),
    )
    c = _day(db, conn, s, said("y", "again: Yan grows tomatoes on the roof.", day=2))

    report = revert_run(conn, a.run_id, by="ops", reason="bad night", cascade=True)

    assert report.runs == [c.run_id, b.run_id, a.run_id]
    assert conn.execute("SELECT count(*) FROM semantic_memory").fetchone() == (0,)


def test_a_run_that_applied_after_another_built_on_it_whatever_their_start_order(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    s = with_settings(settings, chunk_size=2)
    b = _day(db, conn, s, said("ana", "remember: Ana lives in Riga with her sister."))
    a = _day(db, conn, s, said("ana", "again: Ana lives in Riga with her sister.", day=1))
    conn.execute(  # a started first (its row, then its model), but applied after b
        "UPDATE consolidation_runs SET started_at = started_at - interval '1 hour' WHERE id = %s",
        (a.run_id,),
    )
    conn.commit()
    with pytest.raises(RevertRefused, match=f"built on by 1 later run\\(s\\) \\({a.run_id}"):
        revert_run(conn, b.run_id, by="ops", reason="x")


def test_a_cascade_refuses_to_revert_a_run_still_running(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    s = with_settings(settings, chunk_size=2)
    a = _day(db, conn, s, said("ana", "remember: Ana lives in Riga with her sister."))
    b = _day(db, conn, s, said("ana", "again: Ana lives in Riga with her sister.", day=1))
    conn.execute("UPDATE consolidation_runs SET status = 'running' WHERE id = %s", (b.run_id,))
    conn.commit()
    with pytest.raises(RevertRefused, match=f"run {b.run_id}, built on it, is still running"):
        revert_run(conn, a.run_id, by="ops", reason="x", cascade=True)


def test_a_revert_leaves_alone_charges_and_quarantines_that_came_after_it(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    from slowwave.tasks.quarantine import release
    from tests.reliability.fix_faults import FaultyModel

    once = with_settings(settings, max_attempts=1)
    load_episodes(conn, said("ana", "remember: Ana lives in Riga.", "fault: malformed"))
    conn.commit()
    a = consolidate(db, FaultyModel(), HashEmbedder(), once, kind="backfill")
    release(conn, "try again", conversations=["ana"])
    consolidate(db, FaultyModel(), HashEmbedder(), once, kind="backfill")  # quarantined again
    state = conn.execute(
        "SELECT attempts, quarantined_at IS NOT NULL, last_error FROM episodic_memory"
    ).fetchall()

    revert_run(conn, a.run_id, by="ops", reason="x")

    assert (
        conn.execute(
            "SELECT attempts, quarantined_at IS NOT NULL, last_error FROM episodic_memory"
        ).fetchall()
        == state
    )


def test_an_episode_finished_by_a_later_run_is_reverted_with_the_run_that_began_it(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    from tests.fix_episodes import add, at
    from tests.fix_models import fact
    from tests.test_consolidation import SmallContextModel, _long, answer

    small = with_settings(settings, llm_max_tokens=256, related_facts_limit=2)
    add(conn, _long("H", at(2025, 2, 1), messages=24))
    conn.commit()
    before = tables(conn)
    calls = {"n": 0}

    def part(request: object) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # the first run dies after its first part
        return answer(fact(f"User wrote essay part {calls['n']}", "experience"))

    with pytest.raises(KeyboardInterrupt):
        consolidate(db, SmallContextModel({"H": part}), HashEmbedder(), small, kind="backfill")
    (began,) = conn.execute("SELECT id FROM consolidation_runs").fetchone()  # type: ignore[misc]
    finished = consolidate(db, SmallContextModel({"H": part}), HashEmbedder(), small)
    assert finished.episodes_consolidated == 1

    with pytest.raises(RevertRefused, match=f"finished episodes that run\\(s\\) {began} began"):
        revert_run(conn, finished.run_id, by="ops", reason="x")
    report = revert_run(conn, began, by="ops", reason="x", cascade=True)
    assert report.runs == [finished.run_id, began]
    assert tables(conn) == before
