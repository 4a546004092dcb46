"""The nightly and backfill flows under a real (test) Prefect API, with the replay model."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.client.schemas.sorting import ArtifactSort

from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.transcripts import ingest
from tests.fix_episodes import consolidated_once
from tests.fix_locomo import locomo_subset
from tests.fix_model_server import fake_model
from tests.fix_prefect import completed_tasks, flow_run_id_of, summary_of

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "transcripts"


def _artifact(key: str) -> object:
    """The latest version of the artifact (the Prefect server is the session's: other tests'
    flows published earlier ones)."""
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            sort=ArtifactSort.UPDATED_DESC,
            limit=1,
        )
    assert found, f"no artifact {key}"
    data = found[0].data
    if found[0].type == "markdown":
        return data
    return json.loads(data) if isinstance(data, str) else data


@pytest.mark.slow
def test_the_nightly_flow_consolidates_locomo_in_shards_and_publishes_its_summary(
    prefect_api: None,
    db: Database,
    conn: psycopg.Connection,
    flow_settings: Settings,
    tmp_path: Path,
) -> None:
    from slowwave.flows.consolidate import nightly

    # four conversations of 12 sessions, three of them named
    four = locomo_subset(tmp_path, "conv-26", "conv-30", "conv-41", "conv-42", sessions=12)
    ingest(db, four, IngestPolicy.of(flow_settings))
    state = nightly(conversations=["conv-26", "conv-30", "conv-41"], return_state=True)
    assert state.is_completed(), state.message
    with get_client(sync_client=True) as client:
        named = client.read_flow_run(flow_run_id_of(state)).name
    assert re.fullmatch(r"nightly \d{4}-\d{2}-\d{2} \(3 conversations\)", named), named
    summary = summary_of(state)
    assert summary["conversations"] == 3 and summary["chunks_failed"] == 0
    (consolidated,) = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE consolidated_at IS NOT NULL"
    ).fetchone()  # type: ignore[misc]
    assert consolidated == summary["episodes_consolidated"] == 12 + 12 + 12
    run = conn.execute(
        "SELECT status, flow_run_id, facts_inserted, summary->>'kind' FROM consolidation_runs"
    ).fetchone()
    assert run is not None and run[0] == "completed" and run[1] and run[3] == "nightly"
    assert run[2] == summary["facts_inserted"] > 0
    table = _artifact("slowwave-run-summary")
    assert {"measure": "facts new", "value": summary["facts_inserted"]} in table  # type: ignore[operator]
    assert _artifact("slowwave-progress") == 100.0


def test_the_backfill_flow_ingests_then_consolidates_and_fails_only_when_nothing_worked(
    prefect_api: None, db: Database, conn: psycopg.Connection, flow_settings: Settings
) -> None:
    from slowwave.flows.backfill import backfill

    state = backfill(source=str(EXAMPLES / "sample-chats.jsonl"), return_state=True)
    assert state.is_completed(), state.message
    with get_client(sync_client=True) as client:
        named = client.read_flow_run(flow_run_id_of(state)).name
    assert named == "backfill sample-chats.jsonl"
    summary = summary_of(state)
    assert summary["conversations"] == 3 and summary["episodes_consolidated"] == 10
    ingest_table = _artifact("slowwave-ingest")
    assert ingest_table[0]["ingested"] == 26  # type: ignore[index]


@pytest.mark.slow
def test_a_run_with_a_quarantined_conversation_is_red_in_prefect_and_warns_naming_it_by_ref(
    prefect_api: None,
    db: Database,
    conn: psycopg.Connection,
    flow_settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The model answers Kenji's chunks with no JSON, and one attempt is all a chunk gets:
    Kenji's episodes are quarantined while the others' facts are written. Prefect shows a
    failed run (named for what happened), tagged, with a WARNING line and an artifact that
    name the conversation by its reference, never by its id, the reason readable whole."""
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.client.schemas.objects import StateType

    from slowwave.cli.prefect import drain_to_api
    from slowwave.flows.backfill import backfill
    from slowwave.models.ids import conversation_ref
    from slowwave.models.settings import get_settings

    with fake_model(garble=("Osaka",)) as model:
        for name, value in model.env(SLOWWAVE_MAX_ATTEMPTS="1").items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        state = backfill(source=str(EXAMPLES / "sample-chats.jsonl"), return_state=True)
    assert state.type == StateType.FAILED and state.name == "CompletedWithFailures"
    assert "quarantined" in (state.message or "")
    summary = summary_of(state, raise_on_failure=False)
    assert summary["facts_inserted"] > 0 and summary["episodes_quarantined"] > 0
    assert {f["conversation_id"] for f in summary["failures"]} == {"kenji"}
    reason = summary["failures"][0]["reason"]
    assert len(reason) > 40

    run_id = flow_run_id_of(state)
    drain_to_api()  # the log lines still on their way
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(run_id)
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))
    assert run.state is not None and run.state.name == "CompletedWithFailures"
    assert run.state.type == StateType.FAILED
    assert {"failures", "quarantined"} <= set(run.tags)
    warnings = [log.message for log in logs if log.level == 30]
    ref = conversation_ref("kenji")
    assert any(ref in w and reason in w for w in warnings), warnings
    assert not any("kenji" in log.message for log in logs)
    failures = str(_artifact("slowwave-run-failures"))
    assert ref in failures and reason in failures and "kenji" not in failures
    (quarantined,) = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE conversation_id = 'kenji' "
        "AND quarantined_at IS NOT NULL"
    ).fetchone()  # type: ignore[misc]
    assert quarantined == summary["episodes_quarantined"]


@pytest.mark.slow
def test_a_shard_hit_by_a_dropped_connection_is_retried_and_goes_on_where_it_stopped(
    prefect_api: None,
    db: Database,
    conn: psycopg.Connection,
    flow_settings: Settings,
    locomo_one_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import slowwave.flows.consolidate as nightly_module
    import slowwave.tasks.pipeline as stages_module

    real_apply = stages_module.apply_chunks
    calls = 0

    def drops_once(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 3:  # mid-shard, after some chunks were applied
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return real_apply(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(stages_module, "apply_chunks", drops_once)  # the one wiring
    ingest(db, locomo_one_path, IngestPolicy.of(flow_settings))
    state = nightly_module.nightly(conversations=["conv-30"], return_state=True)
    assert state.is_completed(), state.message
    summary = summary_of(state)
    assert summary["chunks_failed"] == 0 and summary["episodes_consolidated"] == 19
    (pending, applied) = conn.execute(
        "SELECT count(*) FILTER (WHERE consolidated_at IS NULL), "
        "(SELECT count(*) FROM consolidation_chunks WHERE status = 'applied') "
        "FROM episodic_memory WHERE conversation_id = 'conv-30'"
    ).fetchone()  # type: ignore[misc]
    assert pending == 0 and applied == summary["chunks"]  # no chunk applied twice
    assert _artifact("slowwave-progress") == 100.0
    with get_client(sync_client=True) as client:
        runs = client.read_task_runs()
        this_run = state.state_details.flow_run_id  # the session's API holds other tests' runs
        shard = [r for r in runs if r.name == "consolidate shard 0" and r.flow_run_id == this_run]
        assert [r.run_count for r in shard] == [2], [(r.name, r.run_count) for r in shard]
        states = client.read_task_run_states(shard[0].id)
    # it waited what the settings say (1 s here, flow_settings), not the shipped 15 s
    waits = [
        # pendulum's DateTime subtracts a datetime, though its stub's overloads leave it out
        (s.state_details.scheduled_time - s.timestamp).total_seconds()  # type: ignore[operator]
        for s in states
        if s.name == "AwaitingRetry" and s.state_details.scheduled_time is not None
    ]
    assert len(waits) == 1 and 0.5 <= waits[0] <= 1.5, waits


@pytest.mark.slow
def test_the_revert_and_forget_flows_run_like_the_rest_with_their_summaries(
    prefect_api: None,
    db: Database,
    conn: psycopg.Connection,
    flow_settings: Settings,
    locomo_one_path: Path,
) -> None:
    from slowwave.flows.consolidate import nightly
    from slowwave.flows.history import forget, revert
    from slowwave.models.errors import HistoryError
    from slowwave.models.ids import conversation_ref

    ingest(db, locomo_one_path, IngestPolicy.of(flow_settings))
    run = summary_of(nightly(conversations=["conv-30"], return_state=True))
    state = revert(run_id=run["run_id"], reason="prompt bug", by="ops", return_state=True)
    assert state.is_completed(), state.message
    assert summary_of(state)["runs"] == [run["run_id"]]
    table = _artifact("slowwave-revert")
    assert {"measure": "facts_removed", "value": str(run["facts_inserted"])} in table  # type: ignore[operator]
    (facts,) = conn.execute("SELECT count(*) FROM semantic_memory").fetchone()  # type: ignore[misc]
    assert facts == 0

    # Prefect keeps a flow run's parameters: the deployment takes the conversation's reference,
    # as the run artifacts show it, and refuses what is not one
    with pytest.raises(HistoryError, match="never the id itself"):
        forget(conversation="conv-30", reason="erasure request", by="dpo")
    ref = conversation_ref("conv-30")
    state = forget(conversation=ref, reason="erasure request", by="dpo", return_state=True)
    assert state.is_completed(), state.message
    with get_client(sync_client=True) as client:
        named = client.read_flow_run(flow_run_id_of(state)).name
    assert named == f"forget conversation {ref}"
    (left,) = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE conversation_id = 'conv-30'"
    ).fetchone()  # type: ignore[misc]
    assert left == 0 and _artifact("slowwave-forget")


@pytest.mark.slow
def test_the_nightly_flow_runs_its_shards_at_once_each_claiming_its_own_conversations(
    prefect_api: None,
    db: Database,
    conn: psycopg.Connection,
    flow_settings: Settings,
    locomo_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from slowwave.flows.consolidate import nightly
    from slowwave.models.settings import get_settings

    monkeypatch.setenv("SLOWWAVE_SHARD_CONCURRENCY", "3")
    monkeypatch.setenv("SLOWWAVE_SHARD_CONVERSATIONS", "1")
    get_settings.cache_clear()
    # four conversations of 12 sessions (two chunks each): enough for shards to overlap
    four = locomo_subset(tmp_path, "conv-26", "conv-30", "conv-41", "conv-42", sessions=12)
    ingest(db, four, IngestPolicy.of(flow_settings))
    state = nightly(return_state=True)  # every conversation, in shards of 1
    assert state.is_completed(), state.message
    summary = summary_of(state)
    assert summary["conversations"] == 4 and summary["shards"] == 4
    assert sum(summary["placement"]["shards"].values()) == 4
    assert consolidated_once(conn) == (0, 0)
    names = completed_tasks(state.state_details.flow_run_id)
    assert {"plan", *(f"consolidate shard {k}" for k in range(4))} <= names
    assert _artifact("slowwave-progress") == 100.0


@pytest.mark.slow
def test_the_nightly_flow_writes_profiles_as_a_task_of_its_own_after_the_shards(
    prefect_api: None,
    db: Database,
    conn: psycopg.Connection,
    flow_settings: Settings,
    locomo_one_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seen in the UI as its own task run; the replay model writes no profile, so the
    conversation's row is kept stale for the next run to retry, and the run still completes."""
    from slowwave.flows.consolidate import nightly
    from slowwave.models.settings import get_settings

    monkeypatch.setenv("SLOWWAVE_PROFILES", "true")
    get_settings.cache_clear()
    ingest(db, locomo_one_path, IngestPolicy.of(flow_settings))
    state = nightly(conversations=["conv-30"], return_state=True)
    assert state.is_completed(), state.message
    summary = summary_of(state)
    assert summary["profiles_written"] == 0 and summary["profiles_failed"] == 1
    assert "profile" in completed_tasks(state.state_details.flow_run_id)
    rows = conn.execute("SELECT conversation_id, stale FROM conversation_profiles").fetchall()
    assert rows == [("conv-30", True)]


@pytest.mark.slow
def test_the_soon_flow_consolidates_a_quiet_conversation_and_leaves_a_talking_one_alone(
    prefect_api: None,
    db: Database,
    conn: psycopg.Connection,
    flow_settings: Settings,
    locomo_one_path: Path,
) -> None:
    import slowwave
    from slowwave.flows.consolidate import soon

    ingest(db, locomo_one_path, IngestPolicy.of(flow_settings))  # conv-30, quiet since 2023
    now = datetime.now(UTC)
    talking = [  # three episodes (an hour apart, the gap is 30 min), the last one just now
        {
            "message_id": f"t{n}",
            "timestamp": (now - timedelta(hours=2 - n)).isoformat(),
            "speaker": "Dana",
            "text": f"Still talking, part {n}.",
        }
        for n in range(3)
    ]
    with slowwave.Memory(flow_settings) as memory:
        assert memory.record("talking", talking).episodes_new == 3

    state = soon(return_state=True)

    assert state.is_completed(), state.message
    pending: dict[str, int] = dict(
        conn.execute(
            "SELECT conversation_id, count(*) FILTER (WHERE consolidated_at IS NULL) "
            "FROM episodic_memory WHERE conversation_id IN ('conv-30', 'talking') "
            "GROUP BY conversation_id"
        ).fetchall()
    )
    assert pending == {"conv-30": 0, "talking": 3}
    kind = conn.execute("SELECT kind FROM consolidation_runs ORDER BY started_at DESC").fetchone()
    assert kind == ("soon",)
