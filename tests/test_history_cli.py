"""The history operations as a user runs them: slowwave facts, facts history, facts undelete,
runs list, runs revert, forget — with --json where they print data, one line on a mistake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fix_processes import run_cli


@pytest.mark.slow
def test_a_user_reads_reverts_and_forgets_from_the_command_line(
    tmp_path: Path, locomo_path: Path, prefect_api_url: str
) -> None:
    env = {
        "SLOWWAVE_LLM_RUNTIME": "replay",
        "SLOWWAVE_REPLAY_DATA": str(locomo_path),
        "PREFECT_API_URL": prefect_api_url,
    }
    backfill = run_cli(tmp_path, "backfill", str(locomo_path), "-c", "conv-30", **env)
    assert backfill.returncode == 0, backfill.stderr[-2000:]

    (run,) = json.loads(run_cli(tmp_path, "runs", "list", "--json", **env).stdout)
    facts = json.loads(run_cli(tmp_path, "facts", "-c", "conv-30", "--json", **env).stdout)
    assert run["status"] == "completed" and len(facts) == run["facts_inserted"] > 0
    history = json.loads(
        run_cli(tmp_path, "facts", "history", facts[0]["id"], "--json", **env).stdout
    )
    assert history[0]["version"] == 1 and facts[0]["id"] in {v["id"] for v in history}

    undelete = run_cli(tmp_path, "facts", "undelete", facts[0]["id"], "-r", "x", **env)
    assert undelete.returncode == 1
    assert (
        undelete.stderr.strip()
        == f"error: fact {facts[0]['id']} is active: there is nothing to undelete [history_error]"
    )

    reverted = run_cli(tmp_path, "runs", "revert", run["id"], "-r", "prompt bug", "--json", **env)
    assert reverted.returncode == 0, reverted.stderr[-2000:]
    assert json.loads(reverted.stdout)["facts_removed"] == len(facts)
    again = run_cli(tmp_path, "runs", "revert", run["id"], "-r", "again", **env)
    assert again.returncode == 1
    assert again.stderr.strip() == f"error: no run {run['id']} [history_error]"
    assert json.loads(run_cli(tmp_path, "facts", "-c", "conv-30", "--json", **env).stdout) == []

    forgot = run_cli(
        tmp_path, "forget", "--conversation", "conv-30", "-r", "erasure", "--json", **env
    )
    assert forgot.returncode == 0, forgot.stderr[-2000:]
    report = json.loads(forgot.stdout)
    assert report["rows"]["episodes"] == 19 and report["purge"] == "done"
    status = json.loads(
        run_cli(tmp_path, "db", "status", "--conversations", "--json", **env).stdout
    )
    assert "conv-30" not in {c["conversation_id"] for c in status["conversations"]}
    assert len(status["conversations"]) == 6  # the six other LoCoMo conversations, untouched
