"""One backfill: ``slowwave backfill FILE`` (the Prefect flow) and ``slowwave.backfill(FILE)``
(the service, in process) on the same file, with the same scripted model, leave the same
episodes, summaries, facts and decision logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fix_model_server import fake_model
from tests.fix_processes import api_backfill, run_cli

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "transcripts" / "sample-chats.jsonl"


def stored(home: Path) -> dict[str, Any]:
    """What a backfill left, without the ids and clocks of this one database."""
    from slowwave.models.settings import Settings
    from slowwave.sql.db import Database

    with Database(Settings(home=home)) as db, db.connection() as conn:
        episodes = conn.execute(
            "SELECT conversation_id, external_key, start_at, end_at, summary, messages, "
            "consolidated_at IS NOT NULL FROM episodic_memory ORDER BY external_key"
        ).fetchall()
        facts = conn.execute(
            "SELECT conversation_id, fact, category, valid_at, invalid_at FROM semantic_memory "
            "ORDER BY conversation_id, fact, valid_at"
        ).fetchall()
        decisions = conn.execute(
            "SELECT d.conversation_id, d.proposed_action, d.action, f.fact, p.fact, "
            "d.event_time, d.reason, cardinality(d.episode_ids) "
            "FROM decision_log d LEFT JOIN semantic_memory f ON f.id = d.fact_id "
            "LEFT JOIN semantic_memory p ON p.id = d.previous_fact_id "
            "ORDER BY d.conversation_id, d.event_time, d.action, f.fact"
        ).fetchall()
    return {"episodes": episodes, "facts": facts, "decisions": decisions}


def test_the_command_and_the_python_api_backfill_the_same_file_to_the_same_memory(
    tmp_path: Path, prefect_api_url: str
) -> None:
    flow_home, api_home = tmp_path / "flow", tmp_path / "api"
    with fake_model() as model:
        env = model.env(SLOWWAVE_SUMMARIZE_ON_INGEST="true", SLOWWAVE_SUMMARY_MIN_CHARS="200")
        try:
            command = run_cli(
                flow_home, "backfill", str(SAMPLE), PREFECT_API_URL=prefect_api_url, **env
            )
            assert command.returncode == 0, command.stderr[-3000:]
            api = api_backfill(api_home, SAMPLE, **env)
            assert api.returncode == 0 and api.stdout.strip() == "completed", api.stderr[-3000:]
            by_flow, by_api = stored(flow_home), stored(api_home)
        finally:
            run_cli(flow_home, "db", "stop")
            run_cli(api_home, "db", "stop")
    summaries = [e[4] for e in by_flow["episodes"] if e[4]]
    assert summaries and all("characters (" in s for s in summaries)  # the model wrote them
    assert any(e[4] is None for e in by_flow["episodes"])  # short ones need none
    assert by_flow["facts"] and by_flow["decisions"]
    assert all(e[6] for e in by_flow["episodes"])  # every episode consolidated
    assert by_api == by_flow
