"""Where the flows' shard tasks run: on the Ray cluster's workers when one is configured
(``SLOWWAVE_RAY_ADDRESS``), next to the actor pools, through ``prefect-ray``'s task runner;
on threads of the flow's process otherwise. Either way each shard is a Prefect task with its
own state and retries in the UI."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from models.llm.base import RuntimeNotAvailable
from models.settings import Settings
from models.workers.cluster import acquire_ray, release_ray


@contextmanager
def shard_runner(settings: Settings) -> Iterator[TaskRunner[Any]]:
    """A started task runner for the run's shards."""
    if not settings.ray_address:
        threads: ThreadPoolTaskRunner[Any] = ThreadPoolTaskRunner(
            max_workers=settings.shard_concurrency
        )
        with threads:
            yield threads
        return
    from prefect_ray.task_runners import RayTaskRunner

    acquire_ray(settings)  # slowwave's own init (workers' environment); the runner joins it
    try:
        with RayTaskRunner(address=settings.ray_address) as runner:
            yield runner
    finally:
        release_ray()


def spread(settings: Settings) -> Any:
    """Around a submit: shards spread over the cluster's nodes (Ray), nothing on threads."""
    if not settings.ray_address:
        return nullcontext()
    from prefect_ray.context import remote_options

    return remote_options(scheduling_strategy="SPREAD")


def check_shareable(settings: Settings, *runtimes: object) -> None:
    """Shards on Ray workers get the runtimes by value (pools by their actors' names): refuse,
    in one line and before anything is claimed, a runtime that cannot travel."""
    if not settings.ray_address:
        return
    for runtime in runtimes:
        try:
            pickle.dumps(runtime)
        except Exception as exc:
            raise RuntimeNotAvailable(f"cannot run shards on Ray: {exc}") from None
