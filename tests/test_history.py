"""History you can read and undo: versions, as-of listings, undelete."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from slowwave.models.errors import HistoryError
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.history import fact_history, get_version, list_facts, undelete
from slowwave.tasks.ingest.load import load_episodes
from tests.fix_episodes import with_settings
from tests.reliability.fix_commands import START, CommandModel, HashEmbedder, said

JOBS = [
    "remember: Mira works as a junior baker in Porto.",
    "now: Mira works as a junior baker in Porto. => Mira runs the pastry section of a hotel.",
    "now: Mira runs the pastry section of a hotel. => Mira opened her own bakery downtown.",
    "now: Mira opened her own bakery downtown. => Mira sold the bakery and teaches cooking.",
]


def run_days(db: Database, settings: Settings, *texts: str) -> None:
    """One run a day, a text each: each version written by its own run."""
    for day, text in enumerate(texts):
        with db.connection() as conn:
            load_episodes(conn, said("mira", text, day=day))
        consolidate(db, CommandModel(), HashEmbedder(), settings, kind="backfill")


@pytest.fixture
def one_a_chunk(settings: Settings) -> Settings:
    return with_settings(settings, chunk_size=1)


def test_the_history_of_a_fact_updated_three_times_has_four_versions_in_order(
    db: Database, conn: psycopg.Connection, one_a_chunk: Settings
) -> None:
    run_days(db, one_a_chunk, *JOBS)
    (latest,) = list_facts(conn, "mira")
    versions = fact_history(conn, latest.id)
    assert [v.fact for v in versions] == [j.split(" => ")[-1].split(": ", 1)[-1] for j in JOBS]
    assert [v.version for v in versions] == [1, 2, 3, 4]
    assert [v.action for v in versions] == ["new", "update", "update", "update"]
    # each version held until the next began (event time), written by its own run
    assert [v.valid_at for v in versions] == [START + timedelta(days=d) for d in range(4)]
    assert [v.invalid_at for v in versions[:-1]] == [v.valid_at for v in versions[1:]]
    assert versions[-1].invalid_at is None
    assert len({v.created_by_run_id for v in versions}) == 4
    assert all(len(v.source_episodic_ids) == 1 for v in versions)
    # the same chain from any version; get_version counts from the first
    assert fact_history(conn, versions[0].id) == versions
    assert get_version(conn, latest.id, 2) == versions[1]
    with pytest.raises(HistoryError, match="has 4 version"):
        get_version(conn, latest.id, 5)


def test_listing_as_of_a_time_shows_what_held_then(
    db: Database, conn: psycopg.Connection, one_a_chunk: Settings
) -> None:
    run_days(db, one_a_chunk, *JOBS)
    then = list_facts(conn, "mira", as_of=START + timedelta(days=1, hours=5))
    assert [f.fact for f in then] == ["Mira runs the pastry section of a hotel."]
    assert len(list_facts(conn, "mira", everything=True)) == 4
    assert list_facts(conn, "mira", as_of=START - timedelta(days=1)) == []


def test_undelete_of_an_invalidated_fact_makes_it_hold_again_and_is_logged(
    db: Database, conn: psycopg.Connection, one_a_chunk: Settings
) -> None:
    run_days(
        db,
        one_a_chunk,
        "remember: Mira keeps three hens in the garden.",
        "drop: Mira keeps three hens in the garden.",
    )
    assert list_facts(conn, "mira") == []
    (hens,) = list_facts(conn, "mira", everything=True)
    assert undelete(conn, hens.id, by="ops", reason="the user says she still has them") == []
    (back,) = list_facts(conn, "mira")
    assert back.id == hens.id and back.invalid_at is None
    logged = conn.execute(
        "SELECT action, fact_id, reason FROM decision_log WHERE action = 'undeleted'"
    ).fetchall()
    assert logged == [("undeleted", hens.id, "ops: the user says she still has them")]
    with pytest.raises(HistoryError, match="is active"):
        undelete(conn, hens.id, by="ops", reason="again")


def test_undelete_of_a_superseded_fact_ends_its_successor_where_it_began(
    db: Database, conn: psycopg.Connection, one_a_chunk: Settings
) -> None:
    run_days(db, one_a_chunk, *JOBS[:2])
    first, second = fact_history(conn, list_facts(conn, "mira")[0].id)
    ended = undelete(conn, first.id, by="ops", reason="the update was a model error")
    assert ended == [second.id]
    (active,) = list_facts(conn, "mira")
    assert active.id == first.id
    after = fact_history(conn, first.id)
    assert after[1].invalid_at == after[1].valid_at  # the successor never held
    with pytest.raises(HistoryError, match="no fact"):
        fact_history(conn, second.created_by_run_id)  # type: ignore[arg-type]


def test_the_python_api_reads_the_same_history(
    db: Database, conn: psycopg.Connection, one_a_chunk: Settings
) -> None:
    from slowwave.memory import Memory

    run_days(db, one_a_chunk, *JOBS[:2])
    with Memory(one_a_chunk, embedder=HashEmbedder()) as memory:
        (latest,) = memory.facts("mira")
        assert memory.history(latest.id) == fact_history(conn, latest.id)
        assert memory.get_version(latest.id, 1).action == "new"
        assert len(memory.facts("mira", everything=True)) == 2


def test_undelete_ends_every_version_that_replaced_the_fact_so_one_head_remains(
    db: Database, conn: psycopg.Connection, one_a_chunk: Settings
) -> None:
    run_days(
        db,
        one_a_chunk,
        "remember: Mira lives in a flat in Riga.",
        "now: Mira lives in a flat in Riga. => Mira lives in a house in Oslo.",
        "now: Mira lives in a house in Oslo. => Mira lives on a farm near Lima.",
    )
    riga, _oslo, lima = fact_history(conn, list_facts(conn, "mira")[0].id)
    assert sorted(undelete(conn, riga.id, by="ops", reason="wrong updates")) == [lima.id]
    assert [f.id for f in list_facts(conn, "mira")] == [riga.id]
