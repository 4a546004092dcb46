"""prefect.yaml deployed to a real Prefect server, run by a real worker, as a user runs it:
`slowwave server`, `slowwave deploy`, `slowwave worker`, then the backfill deployment, the
export its end triggers, and the revert deployment."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from uuid import UUID

import httpx
import polars as pl
import psycopg
import pytest
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    DeploymentFilter,
    DeploymentFilterId,
)
from prefect.client.schemas.objects import FlowRun

from slowwave.models.processes import free_port, start_in_own_group, stop_process_tree
from slowwave.sql.db import Database
from tests.fix_processes import slowwave_env

PROJECT = Path(__file__).resolve().parents[1]
SLOWWAVE = [sys.executable, "-m", "slowwave"]


@dataclass
class PrefectStack:
    api_url: str
    env: dict[str, str]
    logs: Path

    def client(self) -> SyncPrefectClient:
        return SyncPrefectClient(api=self.api_url)

    def log_tail(self, name: str, lines: int = 40) -> str:
        text = (self.logs / f"{name}.log").read_text(errors="replace").splitlines()
        return f"--- {name} ---\n" + "\n".join(text[-lines:])


def _wait_healthy(api_url: str, server_log: Path, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{api_url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"Prefect server not healthy after {timeout} s:\n{server_log.read_text()[-3000:]}")


@pytest.fixture
def prefect_stack(database: Database, locomo_path: Path, tmp_path: Path) -> Iterator[PrefectStack]:
    """A Prefect server on a free port with its own home, slowwave deployed to it and a worker
    serving the pool; server, worker and every flow run they started are stopped by pid."""
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = slowwave_env(
        tmp_path / "slowwave-home",
        DATABASE_URL=database.url,
        PREFECT_HOME=str(tmp_path / "prefect-home"),
        PREFECT_API_URL=api_url,
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_WORKER_QUERY_SECONDS="2",
        SLOWWAVE_PREFECT_PORT=str(port),
        SLOWWAVE_NIGHTLY_TIMEZONE="Europe/Berlin",
        SLOWWAVE_LLM_RUNTIME="replay",
        SLOWWAVE_REPLAY_DATA=str(locomo_path),
        SLOWWAVE_EXPORT_TO=str(tmp_path / "lake"),
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    server = start_in_own_group([*SLOWWAVE, "server"], env, logs / "server.log")
    worker = None
    try:
        _wait_healthy(api_url, logs / "server.log")
        deployed = _run([*SLOWWAVE, "deploy"], env, logs / "deploy.log")
        assert deployed == 0, (logs / "deploy.log").read_text()[-3000:]
        worker = start_in_own_group([*SLOWWAVE, "worker"], env, logs / "worker.log")
        yield PrefectStack(api_url=api_url, env=env, logs=logs)
    finally:
        left = stop_process_tree(worker) if worker is not None else []
        left += stop_process_tree(server)
        assert not left, f"processes still running after SIGKILL: {left}"


def _run(args: list[str], env: dict[str, str], log: Path) -> int:
    import subprocess

    with log.open("wb") as out:
        return subprocess.run(
            args, env=env, cwd=PROJECT, stdout=out, stderr=subprocess.STDOUT, timeout=180
        ).returncode


def _wait_final(client: SyncPrefectClient, run_id: UUID, timeout: float = 400.0) -> FlowRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.read_flow_run(run_id)
        if run.state is not None and run.state.is_final():
            return run
        time.sleep(1)
    return client.read_flow_run(run_id)


def _wait_triggered(client: SyncPrefectClient, deployment: UUID, timeout: float = 240.0) -> FlowRun:
    """The first flow run of ``deployment`` (one an automation started), once final."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment]))
        )
        if runs:
            return _wait_final(client, runs[0].id, timeout=max(deadline - time.monotonic(), 1))
        time.sleep(1)
    pytest.fail(f"no run of the export deployment within {timeout} s of the backfill's end")


@pytest.mark.slow
def test_the_deployed_backfill_runs_on_a_worker_to_completed_and_consolidates(
    prefect_stack: PrefectStack, conn: psycopg.Connection, locomo_path: Path
) -> None:
    with prefect_stack.client() as client:
        nightly = client.read_deployment_by_name("slowwave-nightly/nightly")
        assert nightly.work_pool_name == "process"
        assert [s.schedule.timezone for s in nightly.schedules] == ["Europe/Berlin"]  # type: ignore[union-attr]
        assert nightly.global_concurrency_limit is not None
        assert nightly.global_concurrency_limit.limit == 1
        soon = client.read_deployment_by_name("slowwave-soon/soon")
        assert [s.schedule.interval for s in soon.schedules] == [timedelta(minutes=15)]  # type: ignore[union-attr]
        assert soon.global_concurrency_limit is not None
        assert soon.global_concurrency_limit.limit == 1

        backfill = client.read_deployment_by_name("slowwave-backfill/backfill")
        requested = client.create_flow_run_from_deployment(
            backfill.id,
            parameters={"source": str(locomo_path), "conversations": ["conv-30"]},
        )
        run = _wait_final(client, requested.id)
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]))
        )

    assert run.state is not None and run.state.is_completed(), (
        f"{run.state}\n{prefect_stack.log_tail('worker')}"
    )
    assert {"slowwave-ingest", "slowwave-run-summary", "slowwave-progress"} <= {
        a.key for a in artifacts
    }
    row = conn.execute(
        "SELECT status, kind, episodes_consolidated, facts_inserted FROM consolidation_runs "
        "WHERE flow_run_id = %s",
        (str(run.id),),
    ).fetchone()
    assert row is not None, prefect_stack.log_tail("worker")
    status, kind, consolidated, facts = row
    assert (status, kind, consolidated) == ("completed", "backfill", 19)
    assert facts > 0
    (ingested,) = conn.execute(  # type: ignore[misc]
        "SELECT count(DISTINCT conversation_id) FROM episodic_memory"
    ).fetchone()
    assert ingested == 7  # the whole file is ingested; only conv-30 is consolidated
    (pending,) = conn.execute(  # type: ignore[misc]
        "SELECT count(*) FROM episodic_memory "
        "WHERE conversation_id = 'conv-30' AND consolidated_at IS NULL"
    ).fetchone()
    assert pending == 0

    # the export deployment's trigger ran it after the backfill: the night's facts, in Parquet
    with prefect_stack.client() as client:
        exporter = client.read_deployment_by_name("slowwave-export/export")
        exported = _wait_triggered(client, exporter.id)
    assert exported.state is not None and exported.state.is_completed(), (
        f"{exported.state}\n{prefect_stack.log_tail('worker')}"
    )
    lake = Path(prefect_stack.env["SLOWWAVE_EXPORT_TO"])
    versions = pl.scan_parquet(f"{lake}/versions/**/*.parquet", hive_partitioning=True).collect()
    assert versions.height == facts and set(versions["conversation_id"]) == {"conv-30"}

    # the revert deployment, as an operator starts it from the UI, undoes that run
    (run_id,) = conn.execute(  # type: ignore[misc]
        "SELECT id FROM consolidation_runs WHERE flow_run_id = %s", (str(run.id),)
    ).fetchone()
    with prefect_stack.client() as client:
        revert = client.read_deployment_by_name("slowwave-revert/revert")
        requested = client.create_flow_run_from_deployment(
            revert.id, parameters={"run_id": str(run_id), "reason": "from the UI"}
        )
        reverted = _wait_final(client, requested.id)
        summaries = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[reverted.id]))
        )
    assert reverted.state is not None and reverted.state.is_completed(), (
        f"{reverted.state}\n{prefect_stack.log_tail('worker')}"
    )
    assert reverted.name == f"revert {str(run_id)[:13]}"
    assert "slowwave-revert" in {a.key for a in summaries}
    (pending,) = conn.execute(  # type: ignore[misc]
        "SELECT count(*) FROM episodic_memory "
        "WHERE conversation_id = 'conv-30' AND consolidated_at IS NULL"
    ).fetchone()
    assert pending == 19
