"""The nightly flow on a real Ray cluster of two nodes: shards and actors on both, every
episode consolidated once."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from prefect.settings import PREFECT_API_URL

from benchmarks.local_cluster import alive_nodes
from slowwave.models.settings import Settings, get_settings
from slowwave.sql.db import Database
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.transcripts import ingest
from tests.fix_episodes import consolidated_once
from tests.fix_prefect import completed_tasks


@pytest.mark.slow
def test_the_nightly_flow_on_a_two_node_ray_cluster_runs_shards_and_actors_on_both_nodes(
    prefect_api: None,
    ray_cluster: str,
    db: Database,
    conn: psycopg.Connection,
    flow_settings: Settings,
    locomo_four_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from slowwave.flows.consolidate import nightly

    monkeypatch.setenv("SLOWWAVE_RAY_ADDRESS", ray_cluster)
    monkeypatch.setenv("SLOWWAVE_EMBEDDING_ACTORS_PER_NODE", "1")
    monkeypatch.setenv("SLOWWAVE_SHARD_CONCURRENCY", "4")
    monkeypatch.setenv("SLOWWAVE_SHARD_CONVERSATIONS", "1")
    monkeypatch.setenv("PREFECT_API_URL", str(PREFECT_API_URL.value()))  # for the workers
    get_settings.cache_clear()
    ingest(db, locomo_four_path, IngestPolicy.of(flow_settings))
    (episodes,) = conn.execute("SELECT count(*) FROM episodic_memory").fetchone()  # type: ignore[misc]

    state = nightly(return_state=True)  # 4 conversations in shards of 1: 4 shard tasks

    assert state.is_completed(), state.message
    summary = state.result()
    nodes = set(alive_nodes(ray_cluster))
    assert len(nodes) == 2
    shards, embedding = summary["placement"]["shards"], summary["placement"]["embedding"]
    assert set(shards) == nodes and sum(shards.values()) == 4, shards
    assert set(embedding) == nodes, embedding
    assert summary["episodes_consolidated"] == episodes and summary["chunks_failed"] == 0
    assert consolidated_once(conn) == (0, 0), "every episode consolidated once"
    done = completed_tasks(state.state_details.flow_run_id)
    assert {f"consolidate shard {k}" for k in range(4)} <= done, done
