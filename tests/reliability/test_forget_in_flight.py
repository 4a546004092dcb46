"""Forget and revert while a run works on the same conversation: the run is held at a fault
point with its transaction open (``fix_in_flight``), the operation arrives, the run is let go.

A forget waits only for the transaction already open, then nothing of the conversation is left:
in any column, in any file under the home (the server's heap and WAL included), or in Prefect's
store, and the run writes nothing more about it. A revert keeps the crash suite's invariants,
and a rerun ends where a clean run ends.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from prefect import flow

from slowwave.flows.consolidate import consolidate_run
from slowwave.models.ids import conversation_ref
from slowwave.models.run import RunSummary
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.forget import forget_conversation, forget_fact
from slowwave.tasks.ingest.load import FORGOTTEN, load_episodes
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.transcripts import ingest
from slowwave.tasks.revert import RevertRefused, revert_run
from slowwave.tasks.search import search
from tests.fix_episodes import with_settings
from tests.fix_forget import (
    columns_holding,
    files_holding,
    new_marker,
    prefect_holding,
    transcript,
)
from tests.fix_prefect import flow_run_id_of
from tests.reliability.crash_child import settings_for
from tests.reliability.fix_commands import CommandModel, HashEmbedder, said, story_episodes
from tests.reliability.fix_faults import FaultyModel
from tests.reliability.fix_in_flight import arrive_during
from tests.reliability.fix_outcome import broken_invariants, outcome

# Where the forget arrives, and which time the run reaches the point then: the claim and the
# model answering hold no transaction; the apply and commit points hold the second chain
# step's transaction open, with the forgotten conversation's second chunk written in it.
ARRIVALS = [
    ("claim.after", 1),
    ("model.answered", 1),
    ("apply.lock_episodes.after", 2),
    ("apply.insert_facts.after", 2),
    ("commit.before", 2),
    ("commit.after", 2),
]
HOLDS_A_TRANSACTION = {"apply.lock_episodes.after", "apply.insert_facts.after", "commit.before"}


@flow(name="slowwave-in-flight", log_prints=True)
def backfill_in_flight(url: str, home: str) -> RunSummary:
    """The production run body (``consolidate_run``), with the test doubles for the models."""
    return consolidate_run(
        settings_for(url, Path(home)),
        kind="backfill",
        model=CommandModel(),
        embedder=HashEmbedder(),
    )


def secret_conversation(marker: str) -> tuple[str, list[Any]]:
    """A conversation with a unique id whose every episode, and so every fact, holds
    ``marker``: three chunks of two episodes (the crash child's chunk size)."""
    conversation = f"secret-{uuid.uuid4().hex}"
    return conversation, said(
        conversation,
        *(f"remember: Noor keeps diary {n} under the code word {marker}{n}." for n in range(6)),
    )


def nothing_left(conn: psycopg.Connection, home: Path, *needles: str) -> list[str]:
    """Every place in the database's columns or the home's files that holds a needle."""
    conn.execute("CHECKPOINT")  # what is in memory is in the files now
    return [f"column {c}" for n in needles for c in columns_holding(conn, n)] + [
        f"file {f}" for n in needles for f in files_holding(home, n)
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("point", "hit"), ARRIVALS)
def test_a_forget_during_a_run_leaves_nothing_of_the_conversation_and_the_run_writes_no_more(
    prefect_api: None,
    db: Database,
    conn: psycopg.Connection,
    settings: Settings,
    tmp_path: Path,
    point: str,
    hit: int,
) -> None:
    marker = new_marker()
    secret, episodes = secret_conversation(marker)
    load_episodes(conn, episodes + story_episodes(1))  # and a conversation that stays
    conn.commit()

    arrival = arrive_during(
        point,
        hit,
        lambda: backfill_in_flight(db.url, str(tmp_path), return_state=True),
        lambda: forget_conversation(db, secret, home=settings.home, by="dpo", reason="erasure"),
    )

    state = arrival.run
    assert state.is_completed(), state.message
    summary = state.result()
    if point in HOLDS_A_TRANSACTION:
        assert arrival.waited  # for the transaction open on the conversation, and only it:
    assert arrival.seconds_after_release < 10  # done within seconds of its end
    assert arrival.operation.rows["episodes"] > 0
    assert summary.episodes_forgotten > 0  # what was left of it was dropped
    assert summary.failures == [] and summary.episodes_conflicted == 0
    assert nothing_left(conn, settings.home, marker, secret) == []
    assert nothing_left(conn, tmp_path, marker, secret) == []
    assert prefect_holding(flow_run_id_of(state), marker, secret) == []
    assert all(marker not in h.fact for h in search(conn, HashEmbedder(), marker, secret))
    assert broken_invariants(conn) == {}  # the other conversation: consolidated, exactly once
    (kept,) = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE consolidated_at IS NOT NULL"
    ).fetchone()  # type: ignore[misc]
    assert kept == len(story_episodes(1))
    again = consolidate(
        db, CommandModel(), HashEmbedder(), settings_for(db.url, tmp_path), kind="backfill"
    )
    assert again.chunks == 0  # nothing of it comes back later either


@pytest.mark.slow
def test_forgetting_a_fact_a_run_is_updating_forgets_the_successor_written_from_it(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    marker = new_marker()
    old, new = f"Lea lives in Ghent, code {marker}a.", f"Lea lives in Antwerp, code {marker}b."
    run_settings = settings_for(db.url, tmp_path)
    load_episodes(conn, said("lea", f"remember: {old}", "remember: Lea plays the cello."))
    conn.commit()
    consolidate(db, CommandModel(), HashEmbedder(), run_settings, kind="backfill")
    (fact,) = conn.execute("SELECT id FROM semantic_memory WHERE fact = %s", (old,)).fetchone()  # type: ignore[misc]
    load_episodes(conn, said("lea", f"now: {old} => {new}", "remember: Lea has a dog.", day=1))
    conn.commit()  # the next run updates the fact

    arrival = arrive_during(
        "apply.insert_facts.after",
        1,
        lambda: consolidate(db, CommandModel(), HashEmbedder(), run_settings, kind="backfill"),
        lambda: forget_fact(db, fact, by="dpo", reason="asked to"),
    )

    assert arrival.waited and arrival.seconds_after_release < 10
    assert arrival.run.facts_updated == 1  # the run did update it, in the transaction held
    assert (
        arrival.operation.rows["facts"] == 2 and arrival.operation.rows["successors_forgotten"] == 1
    )
    # the episodes keep what was said (a fact is forgotten, not the conversation); nothing the
    # memory learned from it stays
    assert {c.split(".")[0] for c in columns_holding(conn, marker)} == {"episodic_memory"}
    left = {r[0] for r in conn.execute("SELECT fact FROM semantic_memory").fetchall()}
    assert left == {"Lea plays the cello.", "Lea has a dog."}
    assert broken_invariants(conn) == {}


def test_a_forgotten_conversation_is_refused_at_ingest_unless_the_operator_overrides(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    marker = new_marker()
    source = transcript(tmp_path / "chats.jsonl", marker)
    policy = IngestPolicy.of(with_settings(settings, summarize_on_ingest=False))
    assert ingest(db, source, policy).ingested == 4
    forget_conversation(db, "secret", home=settings.home, by="dpo", reason="erasure", purge=False)

    again = ingest(db, source, policy)  # the same backfill source, run again

    assert (again.ingested, again.rejected) == (0, 3)
    assert [r.reason for r in again.first_rejects] == [FORGOTTEN] * 3
    rejects = Path(str(again.rejects_path)).read_text()
    assert marker not in rejects and "secret" not in rejects  # a reject keeps no content
    assert [len(json.loads(line)["excerpt"]) for line in rejects.splitlines()] == [0, 0, 0]
    (episodes,) = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE conversation_id = 'secret'"
    ).fetchone()  # type: ignore[misc]
    assert episodes == 0

    allowed = ingest(db, source, IngestPolicy.of(settings, allow_forgotten=True))

    assert (allowed.ingested, allowed.rejected) == (3, 0)


@pytest.mark.slow
def test_a_failed_conversation_reaches_prefect_by_reference_never_by_id(
    prefect_api: None, db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:

    conversation = f"failing-{uuid.uuid4().hex}"
    load_episodes(conn, said(conversation, "remember: Ivo rides to work.", "fault: malformed"))
    conn.commit()

    @flow(name="slowwave-failing", log_prints=True)
    def failing() -> RunSummary:
        return consolidate_run(
            with_settings(settings_for(db.url, tmp_path), max_attempts=1),
            kind="backfill",
            model=FaultyModel(),
            embedder=HashEmbedder(),
        )

    state = failing(return_state=True)
    (failure,) = state.result().failures
    assert failure.conversation_id == conversation  # slowwave's own record names it
    assert prefect_holding(flow_run_id_of(state), conversation) == []
    assert prefect_holding(flow_run_id_of(state), conversation_ref(conversation))


@pytest.mark.slow
@pytest.mark.parametrize(("point", "hit"), [("model.answered", 1), ("commit.before", 1)])
def test_a_revert_during_a_run_on_the_same_conversations_keeps_every_invariant(
    db: Database, conn: psycopg.Connection, tmp_path: Path, point: str, hit: int
) -> None:
    """Run A consolidates each conversation's first days; run B has claimed their later days
    when A is reverted. Held before its apply, B loses its claim (no episode of a later day is
    consolidated before the earlier ones A gave back); held in its transaction, B commits
    first and the revert finds it built on A, still running: refused, nothing changed. Either
    way the rerun ends where a clean run ends."""
    run_settings = settings_for(db.url, tmp_path)
    everything = story_episodes(3)
    first_days = [e for e in everything if e.start_at.day < 4]

    def run() -> RunSummary:
        return consolidate(db, CommandModel(), HashEmbedder(), run_settings, kind="backfill")

    load_episodes(conn, everything)
    conn.commit()
    run()
    clean = outcome(conn)
    conn.execute("TRUNCATE consolidation_runs, episodic_memory, semantic_memory CASCADE")
    conn.execute("TRUNCATE decision_log, consolidation_chunks, history_operations")
    load_episodes(conn, first_days)
    conn.commit()
    first = run()
    load_episodes(conn, everything)
    conn.commit()

    def revert_first() -> Any:
        try:
            with db.connection() as own:
                return revert_run(own, first.run_id, by="ops", reason="prompt bug")
        except RevertRefused as exc:
            return exc

    arrival = arrive_during(point, hit, run, revert_first)

    broken = broken_invariants(conn)
    broken.pop("an episode left pending or claimed", None)  # the revert gave them back
    assert broken == {}
    (charged,) = conn.execute("SELECT count(*) FROM episodic_memory WHERE attempts > 0").fetchone()  # type: ignore[misc]
    assert charged == 0
    if point == "commit.before":  # B committed on A's facts first: built on A, still running
        assert isinstance(arrival.operation, RevertRefused)
        assert "still running" in str(arrival.operation)
        assert arrival.run.episodes_consolidated == 3 * 4 and arrival.run.chunks_conflicted == 0
        revert_run(conn, first.run_id, by="ops", reason="prompt bug", cascade=True)  # now it may
    else:  # B had only claimed there: it gives its claim back, applies nothing, is not charged
        assert arrival.operation.runs == [first.run_id]
        assert arrival.operation.episodes_taken_back == 3 * 4
        assert arrival.run.episodes_consolidated == 0 and arrival.run.chunks_failed == 0
        assert arrival.run.chunks_conflicted == 3
    run()
    assert broken_invariants(conn) == {}
    assert outcome(conn) == clean
