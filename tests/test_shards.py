"""Pure logic of a run's shards: how they are planned and how their summaries add up."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from slowwave.models.run import ChunkFailure, RunSummary
from slowwave.tasks.consolidate import ShardSpec, shard_specs


def test_due_conversations_are_cut_into_shards_of_the_set_size_the_last_one_smaller() -> None:
    assert shard_specs(0, 500) == []
    assert shard_specs(7, 2) == [ShardSpec(0, 2), ShardSpec(1, 2), ShardSpec(2, 2), ShardSpec(3, 1)]
    assert sum(s.max_conversations for s in shard_specs(100_001, 500)) == 100_001


def test_a_run_adds_up_its_shards_counts_times_failures_and_placement() -> None:
    run_id = uuid4()
    run = RunSummary(run_id=run_id, kind="nightly", started_at=datetime.now(UTC))
    run.episodes_not_due = 4  # counted once for the run, never added from shards
    for node, k in (("a", 1), ("b", 2)):
        shard = RunSummary(run_id=run_id, kind="nightly", started_at=datetime.now(UTC))
        shard.shards, shard.conversations, shard.facts_inserted = 1, 10 * k, k
        shard.episodes_not_due = 99
        shard.add_time("apply", 1.5)
        shard.place("shards", [node])
        shard.failures.append(
            ChunkFailure(
                conversation_id=node, chunk_id=uuid4(), episodes=1, quarantined=False, reason="x"
            )
        )
        run.merge(shard)
    assert (run.shards, run.conversations, run.facts_inserted) == (2, 30, 3)
    assert run.episodes_not_due == 4
    assert run.stage_seconds == {"apply": 3.0}
    assert run.placement == {"shards": {"a": 1, "b": 1}}
    assert [f.conversation_id for f in run.failures] == ["a", "b"]


def test_a_database_only_this_machine_reaches_is_told_apart_from_one_a_cluster_reaches() -> None:
    from slowwave.sql.db.database import machine_local

    assert machine_local("postgresql://postgres:@/postgres?host=/tmp/pgdata")
    assert machine_local("postgresql://app:pw@127.0.0.1:5432/slowwave")
    assert machine_local("postgresql://app:pw@localhost/slowwave")
    assert not machine_local("postgresql://app:pw@db.internal:5432/slowwave")
    assert not machine_local("postgresql://app:pw@10.0.0.5/slowwave")
    # keyword DSNs, read by libpq's parser: a named host is another machine's
    assert not machine_local("host=db.internal dbname=x")
    assert machine_local("host=/var/run/postgresql dbname=x")
    assert machine_local("host=localhost port=5432 dbname=x password='p@ss w'")
    # a host list is this machine's only if every host is
    assert not machine_local("host=localhost,db.internal dbname=x")
    assert machine_local("postgresql://app@localhost,127.0.0.1/x")
    assert not machine_local("hostaddr=10.0.0.5 dbname=x")


def test_a_runtime_that_cannot_travel_to_ray_is_refused_before_ray_is_started() -> None:
    """With a cluster address, a runtime that cannot be pickled to a Ray worker is refused in
    one line before anything is claimed, with no Ray connection made; one that can goes on;
    without an address nothing is checked."""
    import threading

    from slowwave.flows.runners import check_shareable
    from slowwave.models.errors import RuntimeNotAvailable
    from slowwave.models.settings import Settings

    settings = Settings(ray_address="127.0.0.1:1", _env_file=None)
    check_shareable(settings, {"a": "runtime"})
    with pytest.raises(RuntimeNotAvailable, match="cannot run shards on Ray"):
        check_shareable(settings, {"a": "runtime"}, threading.Lock())
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized()  # nothing reached for 127.0.0.1:1
    check_shareable(Settings(_env_file=None), threading.Lock())
