"""Ctrl-C as an operator types it, in a terminal: the command stops within seconds, rolls back
the chunk in flight without waiting for the model, gives back its claims, records the run as
interrupted, exits 130 and leaves no process behind; run again, it ends where a clean run
ends."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psutil
import pytest

from slowwave.sql.db import Database
from tests.fix_db import home_settings
from tests.fix_model_server import fake_model
from tests.fix_processes import run_cli, slowwave_env
from tests.fix_terminal import Terminal, slowwave

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "transcripts" / "sample-chats.jsonl"


def _state(home: Path) -> tuple[list[tuple[str, str]], int, list[str]]:
    """The home's active facts, its episodes still claimed, and its runs' statuses."""
    with Database(home_settings(home)) as db, db.connection() as conn:
        facts = conn.execute(
            "SELECT conversation_id, fact FROM semantic_memory WHERE invalid_at IS NULL "
            "ORDER BY 1, 2"
        ).fetchall()
        claimed = conn.execute(
            "SELECT count(*) FROM episodic_memory WHERE claimed_by IS NOT NULL"
        ).fetchone()
        runs = conn.execute("SELECT status FROM consolidation_runs ORDER BY started_at").fetchall()
    assert claimed is not None
    return [(c, f) for c, f in facts], int(claimed[0]), [r[0] for r in runs]


@pytest.mark.slow
def test_ctrl_c_during_a_backfill_consolidation_exits_130_within_10_s_and_a_rerun_ends_clean(
    tmp_path: Path,
) -> None:
    home, clean_home = tmp_path / "home", tmp_path / "clean"
    hold = threading.Event()
    # the first two answers come back (their chunks are applied), every later one never does
    with fake_model(hold=hold, hold_after=2) as model:
        terminal = Terminal(
            slowwave("backfill", str(SAMPLE)), slowwave_env(home, **model.env()), cwd=tmp_path
        )
        try:
            assert model.held.wait(240), terminal.output[-3000:]
            time.sleep(1.0)  # the model call is in flight, the run waits on it
            started = terminal.descendants()
            assert started, "the backfill started no server of its own?"
            pressed = time.monotonic()
            terminal.ctrl_c()
            status = terminal.wait(10)
            took = time.monotonic() - pressed
        finally:
            terminal.close()
    assert status == 130, terminal.output[-3000:]
    assert took < 10
    assert "interrupting" in terminal.output
    left = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert left == [], f"left running: {[p.cmdline() for p in left]}"

    facts, claimed, runs = _state(home)
    assert runs == ["interrupted"]
    assert claimed == 0  # its claims were given back: the next run takes them at once
    assert len(facts) > 0  # what was applied before the interrupt stays

    with fake_model() as model:
        again = run_cli(home, "backfill", str(SAMPLE), **model.env())
        clean = run_cli(clean_home, "backfill", str(SAMPLE), **model.env())
    assert again.returncode == 0, again.stderr
    assert clean.returncode == 0, clean.stderr
    rerun_facts, claimed, runs = _state(home)
    assert runs == ["interrupted", "completed"]
    assert claimed == 0
    assert rerun_facts == _state(clean_home)[0]
