"""The nightly flow on a real Ray cluster of two nodes, one of which is lost in the middle of
the night (every process of it killed, as a preempted machine's): the run ends with its claims
released and says what it lost, the node comes back, and the next run spreads shards and
actors over both nodes again and leaves the database a clean run's."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest
from prefect.settings import PREFECT_API_URL

from benchmarks.local_cluster import LocalCluster, alive_nodes
from slowwave.models.embedding.base import Embedder
from slowwave.models.llm.replay import LoCoMoReplayModel
from slowwave.models.settings import Settings, get_settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.transcripts import ingest
from tests.fix_db import TABLES
from tests.fix_episodes import consolidated_once
from tests.fix_locomo import locomo_subset
from tests.fix_prefect import shard_runs, summary_of
from tests.reliability.fix_outcome import broken_invariants, outcome

# conversations the shards have started on (claimed, or already done) when the node is lost:
# with four shards spread over two nodes, three started means one at least on the lost node
STARTED = """
    SELECT count(DISTINCT conversation_id) FROM episodic_memory
    WHERE claimed_by IS NOT NULL OR consolidated_at IS NOT NULL"""


def lose_node_once_started(db: Database, cluster: LocalCluster, node: int) -> threading.Thread:
    """Kill ``node`` (SIGKILL to all its processes) once three shards have started."""

    def watch() -> None:
        deadline = time.monotonic() + 120
        with db.connection() as conn:
            while time.monotonic() < deadline:
                (started,) = conn.execute(STARTED).fetchone()  # type: ignore[misc]
                if started >= 3:
                    break
                time.sleep(0.2)
        cluster.kill_node(node)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    return watcher


@pytest.mark.slow
def test_a_worker_node_lost_mid_night_and_back_leaves_a_clean_runs_memory_on_both_nodes(
    prefect_api: None,
    ray_cluster: LocalCluster,
    db: Database,
    conn: psycopg.Connection,
    flow_settings: Settings,
    locomo_path: Path,
    embedder: Embedder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from slowwave.flows.consolidate import nightly

    # four conversations of 12 sessions: two chunks each (8 and 4)
    four = locomo_subset(tmp_path, "conv-26", "conv-30", "conv-41", "conv-42", sessions=12)
    ingest(db, four, IngestPolicy.of(flow_settings))
    consolidate(db, LoCoMoReplayModel(locomo_path), embedder, flow_settings)
    clean = outcome(conn)
    conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
    ingest(db, four, IngestPolicy.of(flow_settings))
    (episodes,) = conn.execute("SELECT count(*) FROM episodic_memory").fetchone()  # type: ignore[misc]

    monkeypatch.setenv("SLOWWAVE_RAY_ADDRESS", ray_cluster.address)
    monkeypatch.setenv("SLOWWAVE_EMBEDDING_ACTORS_PER_NODE", "1")
    monkeypatch.setenv("SLOWWAVE_SHARD_CONCURRENCY", "4")
    monkeypatch.setenv("SLOWWAVE_SHARD_CONVERSATIONS", "1")
    monkeypatch.setenv("PREFECT_API_URL", str(PREFECT_API_URL.value()))  # for the workers
    get_settings.cache_clear()

    watcher = lose_node_once_started(db, ray_cluster, node=1)
    lost = nightly(return_state=True)  # 4 conversations in shards of 1, over both nodes
    watcher.join(timeout=130)
    assert not watcher.is_alive()

    status, error = conn.execute(
        "SELECT status, error FROM consolidation_runs ORDER BY started_at LIMIT 1"
    ).fetchone()  # type: ignore[misc]
    if lost.is_completed():  # the lost node's shards had finished: nothing was lost
        assert status == "completed", error
    else:
        assert status == "failed" and error.startswith("ShardLost: shard "), error
        assert "Ray node" in error and "\n" not in error, error
    # the shards on the node that stayed were not retried: what they had asked of an
    # embedding actor on the lost node went to the other one
    assert max(shard_runs(lost.state_details.flow_run_id)) == 1
    (claimed,) = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE claimed_by IS NOT NULL"
    ).fetchone()  # type: ignore[misc]
    assert claimed == 0, "the lost run released its claims"

    ray_cluster.start_node()  # the machine comes back
    nodes = set(alive_nodes(ray_cluster.address))
    assert len(nodes) == 2
    state = nightly(return_state=True)

    assert state.is_completed(), state.message
    summary = summary_of(state)
    shards, embedding = summary["placement"]["shards"], summary["placement"]["embedding"]
    assert set(embedding) == nodes, embedding  # an embedding actor on the node that came back
    if summary["conversations"] > 1:
        assert set(shards) == nodes, shards
    assert summary["chunks_failed"] == 0
    (done,) = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE consolidated_at IS NOT NULL"
    ).fetchone()  # type: ignore[misc]
    assert done == episodes
    assert consolidated_once(conn) == (0, 0), "every episode consolidated once"
    assert broken_invariants(conn) == {}
    assert outcome(conn) == clean  # nothing lost, nothing twice, nothing half applied
    (charged,) = conn.execute("SELECT count(*) FROM episodic_memory WHERE attempts > 0").fetchone()  # type: ignore[misc]
    assert charged == 0, "a lost node is not the episodes' fault"
