"""Prefect fixtures: one test API server for the session, and settings as a deployment reads
them (from the environment)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from prefect.client.schemas.objects import State
from prefect.testing.utilities import prefect_test_harness

from slowwave.models.settings import Settings, get_settings


@pytest.fixture(scope="session")
def prefect_api() -> Iterator[None]:
    """One Prefect test server for the session (starting one costs 10-15 s)."""
    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def prefect_api_url(prefect_api: None) -> str:
    """The session's test API, for the commands a test runs (``run_cli(...,
    PREFECT_API_URL=prefect_api_url)``): a backfill reports its flow run there instead of
    starting a temporary API of its own, 10-15 s each. The tests of that temporary API, and of
    pages run as a reader would, do not take it."""
    from prefect.settings import PREFECT_API_URL

    return str(PREFECT_API_URL.value())


@pytest.fixture
def flow_settings(
    settings: Settings, locomo_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Settings]:
    """The flows read settings from the environment, as a deployment would."""
    monkeypatch.setenv("SLOWWAVE_HOME", str(settings.home))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("SLOWWAVE_LLM_RUNTIME", "replay")
    monkeypatch.setenv("SLOWWAVE_REPLAY_DATA", str(locomo_path))
    monkeypatch.setenv("SLOWWAVE_SHARD_CONVERSATIONS", "2")
    # a retried shard waits a second, not a crashed engine's 15 (the faults here restart nothing)
    monkeypatch.setenv("SLOWWAVE_SHARD_RETRY_DELAY_SECONDS", "1")
    get_settings.cache_clear()
    yield get_settings()
    get_settings.cache_clear()


def completed_tasks(flow_run_id: object) -> set[str]:
    """The names of the flow run's task runs that completed."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs()
    return {
        r.name
        for r in runs
        if r.flow_run_id == flow_run_id and r.state is not None and r.state.is_completed()
    }


def shard_runs(flow_run_id: object) -> list[int]:
    """How many times each shard task of the flow run ran (a Prefect retry is a second)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    return [r.run_count for r in runs if r.name.startswith("consolidate shard")]


def summary_of(state: State[Any], *, raise_on_failure: bool = True) -> dict[str, Any]:
    """The summary a flow's final state holds: the flows return a state of their own (its data
    the summary), which Prefect's types take for the result itself."""
    summary: object = state.result(raise_on_failure=raise_on_failure)
    assert isinstance(summary, dict), summary
    return summary


def flow_run_id_of(state: State[Any]) -> UUID:
    """The id of the flow run that ended in ``state``."""
    run_id = state.state_details.flow_run_id
    assert run_id is not None, state
    return run_id
