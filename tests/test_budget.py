"""A run's token budget: once the run (or a tenant) has spent it, no new chunk is opened,
those in flight finish, the rest is left pending with the reason, and the next run, without a
budget, ends with the facts one unbudgeted run makes. One tenant's spending never stops
another's conversations. Against an HTTP model endpoint of the test's own."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from slowwave.models.embedding.base import Embedder
from slowwave.models.llm import load_model
from slowwave.models.run import RunSummary
from slowwave.models.settings import Settings
from slowwave.models.tenant import conversation_key
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from tests.fix_db import TABLES
from tests.fix_episodes import add, at, episodes_state, facts, make_episode
from tests.fix_model_server import FakeModel, fake_model

pytestmark = pytest.mark.slow


def _stories(conn: psycopg.Connection, conversations: dict[str, str], tag: str) -> None:
    """Three episodes a conversation (key: its stored key), a day apart."""
    for key, name in conversations.items():
        for day in (1, 2, 3):
            said = f"{name} {tag} story, day {day}."
            add(conn, make_episode(key, f"{tag}{name}{day}", said, at(2024, 3, day)))


def _run(
    db: Database, embedder: Embedder, settings: Settings, model: FakeModel, **budget: Any
) -> RunSummary:
    on = model.settings(settings, **budget)
    return consolidate(db, load_model(on), embedder, on)


# what a budget counts: a chunk's billed tokens, or its model calls
SPENT = {"tokens": "prompt_tokens + completion_tokens", "calls": "model_calls"}


def _spent(conn: psycopg.Connection, run: RunSummary, what: str = "tokens") -> int:
    (spent,) = conn.execute(  # type: ignore[misc]
        f"SELECT sum({SPENT[what]}) FROM consolidation_chunks WHERE run_id = %s", (run.run_id,)
    ).fetchone()
    return int(spent)


def _facts(conn: psycopg.Connection) -> list[tuple[str, str]]:
    return sorted((f["conversation_id"], f["fact"]) for f in facts(conn))


@pytest.mark.parametrize("what", ["tokens", "calls"])
def test_a_run_stops_at_its_budget_and_the_next_one_finishes_with_an_unbudgeted_runs_facts(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings, what: str
) -> None:
    people = {"ana": "Ana", "ben": "Ben", "cy": "Cy"}
    with fake_model() as model:
        _stories(conn, people, "x")
        clean = _run(db, embedder, settings, model)
        assert clean.episodes_consolidated == 9 and clean.episodes_over_budget == 0
        clean_facts, needed = _facts(conn), _spent(conn, clean, what)
        assert _spent(conn, clean, "calls") == clean.model_calls == 9  # a call a chunk
        (largest,) = conn.execute(  # type: ignore[misc]
            f"SELECT max({SPENT[what]}) FROM consolidation_chunks"
        ).fetchone()

        conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
        _stories(conn, people, "x")
        budget = needed // 3
        stopped = _run(db, embedder, settings, model, **{f"run_{what[:-1]}_budget": budget})
        # the budget, and the chunks in flight when it was reached: one per conversation
        assert _spent(conn, stopped, what) <= budget + len(people) * largest
        assert stopped.status == "completed" and stopped.episodes_over_budget > 0
        assert stopped.episodes_consolidated + stopped.episodes_over_budget == 9
        (record,) = conn.execute(  # type: ignore[misc]
            "SELECT summary FROM consolidation_runs WHERE id = %s", (stopped.run_id,)
        ).fetchone()
        assert record["episodes_over_budget"] == stopped.episodes_over_budget
        pending = [e for e in episodes_state(conn).values() if e["consolidated_at"] is None]
        assert len(pending) == stopped.episodes_over_budget
        assert all(e["claimed_by"] is None and e["attempts"] == 0 for e in pending)

        rest = _run(db, embedder, settings, model)
    assert rest.episodes_consolidated == stopped.episodes_over_budget
    assert _facts(conn) == clean_facts


def test_a_tenant_that_spent_its_budget_stops_and_another_tenant_goes_on(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    acme = {conversation_key(c, "acme"): c for c in ("a1", "a2", "a3")}
    globex = {conversation_key("g1", "globex"): "g1"}
    with fake_model() as model:
        _stories(conn, globex, "y")
        alone = _run(db, embedder, settings, model)
        enough_for_globex = _spent(conn, alone)  # all three of its chunks
        conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")

        _stories(conn, {**acme, **globex}, "y")
        run = _run(db, embedder, settings, model, tenant_token_budget=enough_for_globex + 1)
    state = episodes_state(conn)
    left = {key for key, e in state.items() if e["consolidated_at"] is None}
    assert run.episodes_over_budget == len(left) > 0
    assert all(key.startswith("ya") for key in left)  # acme's, three conversations at a time
    assert not any(key.startswith("yg") for key in left)  # globex finished within its own
