"""Quarantined episodes: listed with their reason, released back to pending by an operator."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from slowwave.models.consolidation import ConsolidationOutput
from slowwave.models.embedding.base import Embedder
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.quarantine import list_quarantined, release
from tests.fix_episodes import (
    add,
    at,
    decisions,
    episodes_state,
    facts,
    make_episode,
    with_settings,
)
from tests.fix_models import ScriptedModel, fact
from tests.fix_processes import run_cli


def _quarantined(db: Database, conn: psycopg.Connection, embedder: Embedder, s: Settings) -> None:
    add(
        conn,
        *[
            make_episode("q", f"q{i}", f"I restore old clocks, {i}.", at(2025, 1, i))
            for i in (1, 2, 3)
        ],
        *[
            make_episode("ok", f"o{i}", f"I bake rye bread, {i}.", at(2025, 1, i))
            for i in (1, 2, 3)
        ],
    )
    broken = ScriptedModel(
        {
            "q1": lambda r: '{"facts": [',
            "o1": lambda r: ConsolidationOutput(facts=[fact("User bakes rye bread", "interest")]),
        }
    )
    consolidate(db, broken, embedder, with_settings(s, max_attempts=1))


def test_quarantined_episodes_are_listed_with_attempts_and_their_last_error(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    _quarantined(db, conn, embedder, settings)
    listed = list_quarantined(conn)
    assert sorted(e.external_key for e in listed) == ["q1", "q2", "q3"]
    assert all(e.attempts == 1 for e in listed)
    assert all("not a valid consolidation output" in (e.last_error or "") for e in listed)
    assert list_quarantined(conn, conversations=["ok"]) == []


def test_a_release_returns_them_to_pending_is_logged_and_the_next_run_takes_them(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    _quarantined(db, conn, embedder, settings)
    released = release(conn, "ops: the model was fixed (ticket 42)", conversations=["q"])
    assert released == {"q": 3}
    state = episodes_state(conn)
    assert all(
        state[k]["quarantined_at"] is None and state[k]["attempts"] == 0 for k in ("q1", "q2", "q3")
    )
    (logged,) = [d for d in decisions(conn) if d["action"] == "released"]
    assert logged["reason"] == "ops: the model was fixed (ticket 42)"
    assert sorted(logged["episode_ids"]) == sorted(state[k]["id"] for k in ("q1", "q2", "q3"))
    fixed = ScriptedModel(
        {"q1": lambda r: ConsolidationOutput(facts=[fact("User restores old clocks", "interest")])}
    )
    summary = consolidate(db, fixed, embedder, settings, kind="nightly")
    assert summary.episodes_consolidated == 3
    assert "User restores old clocks" in {f["fact"] for f in facts(conn, "q")}


@pytest.mark.slow
def test_the_cli_lists_releases_and_refuses_a_release_without_a_target(tmp_path: Path) -> None:
    empty = run_cli(tmp_path, "quarantine", "list")
    assert empty.returncode == 0 and "no quarantined episodes" in empty.stdout
    refused = run_cli(tmp_path, "quarantine", "release", "--reason", "x")
    assert refused.returncode != 0 and "--conversation" in refused.stderr
    done = run_cli(tmp_path, "quarantine", "release", "--reason", "x", "--all")
    assert done.returncode == 0 and "released 0 episode(s)" in done.stdout
