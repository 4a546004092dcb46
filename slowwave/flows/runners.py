"""Where the flows' shard tasks run: on the Ray cluster's workers when one is configured
(``SLOWWAVE_RAY_ADDRESS``), next to the actor pools, through ``prefect-ray``'s task runner;
on threads of the flow's process otherwise. Either way each shard is a Prefect task with its
own state and retries in the UI."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import cloudpickle
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from slowwave.models.errors import RuntimeNotAvailable
from slowwave.models.settings import Settings
from slowwave.models.workers.cluster import acquire_ray, node_addresses, release_ray
from slowwave.sql.db.database import machine_local


@contextmanager
def shard_runner(settings: Settings) -> Iterator[TaskRunner[Any]]:
    """A started task runner for the run's shards (``settings.database.url``: the run's)."""
    if not settings.ray.address:
        threads: ThreadPoolTaskRunner[Any] = ThreadPoolTaskRunner(
            max_workers=settings.orchestration.shard_concurrency
        )
        with threads:
            yield threads
        return
    from prefect_ray.task_runners import RayTaskRunner

    acquire_ray(settings)  # slowwave's own init (workers' environment); the runner joins it
    try:
        check_reachable(settings)  # nothing is claimed yet: shards claim when they start
        with RayTaskRunner(address=settings.ray.address) as runner:
            yield runner
    finally:
        release_ray()


def spread(settings: Settings) -> Any:
    """Around a submit: shards spread over the cluster's nodes (Ray), nothing on threads.
    Ray never re-runs a shard whose worker died (``max_retries=0``): a fresh attempt would
    have lost its counts and could claim past the run's cap; the run fails and releases."""
    if not settings.ray.address:
        return nullcontext()
    from prefect_ray.context import remote_options

    return remote_options(scheduling_strategy="SPREAD", max_retries=0)


class ShardLost(RuntimeError):
    """A shard's Ray worker, or the node it ran on, went away while it ran (a preempted or
    failed machine). Ray does not run it again (``spread``): the run fails, releases its claims,
    and the next run takes the shard's conversations where its last committed chunk left
    them."""


def lost_shard(exc: BaseException, index: int) -> BaseException:
    """``exc`` as a ``ShardLost`` of one line when it says shard ``index``'s worker or node went
    away (Ray's own message, many lines of advice, stays its cause); else ``exc`` itself."""
    ray = sys.modules.get("ray")
    if ray is None:
        return exc
    errors = ray.exceptions
    if isinstance(exc, errors.NodeDiedError):
        node = re.search(r"node ID: ([0-9a-f]+)", str(exc))
        what = f"its Ray node{f' {node.group(1)[:12]}' if node else ''} died"
    elif isinstance(exc, errors.WorkerCrashedError | errors.RayActorError):
        what = "its Ray worker died"
    else:
        return exc
    shard = ShardLost(
        f"shard {index} was lost while it ran: {what}; the run released its claims and the "
        "next run takes its conversations again"
    )
    shard.__cause__ = exc
    return shard


def check_shareable(settings: Settings, *runtimes: object) -> None:
    """Shards on Ray workers get the runtimes by value (pools by their actors' names): refuse,
    in one line and before anything is claimed, a runtime that cannot travel."""
    if not settings.ray.address:
        return
    for runtime in runtimes:
        try:
            cloudpickle.dumps(runtime)
        except Exception as exc:
            raise RuntimeNotAvailable(f"cannot run shards on Ray: {exc}") from None


def check_reachable(settings: Settings) -> None:
    """On a cluster of several machines (Ray joined), refuse a database only this machine
    reaches: the shards on other nodes could not connect."""
    url = settings.database.url.get_secret_value() if settings.database.url else ""
    if machine_local(url) and len(set(node_addresses())) > 1:
        raise RuntimeNotAvailable(
            "cannot run shards on a Ray cluster of several machines against a database only "
            "this one reaches (the embedded server, or localhost): set DATABASE_URL to a "
            "Postgres every node can reach"
        )
