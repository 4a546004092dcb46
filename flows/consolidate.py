"""The nightly consolidation flow: what slowwave's users schedule and watch in the Prefect UI.

A ``plan`` task counts the due conversations (nothing claimed or read) and cuts them into shards
of ``SLOWWAVE_SHARD_CONVERSATIONS``; each shard is a Prefect task that claims its own
conversations when it starts, so the flow's memory does not grow with the backlog. Up to
``SLOWWAVE_SHARD_CONCURRENCY`` shards run at once: on threads of this process, or on the Ray
cluster's workers (``flows.runners``) next to the actor pools, which every shard shares. A task
per shard, never per conversation or chunk: a task costs milliseconds on threads and far more
on Ray. Inside a shard every conversation is a chain (``tasks.chains``): its chunk k+1 is
opened only after chunk k is applied, and is submitted to the runtime pools the moment it is,
so the engine is fed continuously. Each shard returns its counts and stage times, merged into
the run's summary artifact.

Transient failures (an engine restart, a dropped connection) are retried with backoff; poison
work is quarantined by the core and listed. The run ends Completed — with a warning artifact
when some conversations failed — and Failed only when nothing could be done.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.cache_policies import NONE
from prefect.futures import PrefectFuture, as_completed
from prefect.runtime import flow_run
from prefect.states import Completed, Failed, State
from prefect.tasks import exponential_backoff
from pydantic import SecretStr

from slowwave.flows.runners import check_shareable, shard_runner, spread
from slowwave.models.embedding import load_embedder
from slowwave.models.embedding.base import Embedder
from slowwave.models.ids import conversation_ref
from slowwave.models.llm import load_model
from slowwave.models.llm.base import StructuredModel
from slowwave.models.run import RunSummary
from slowwave.models.settings import Settings, get_settings
from slowwave.models.workers.cluster import current_node
from slowwave.models.workers.pool import actor_nodes
from slowwave.sql.db import Database, migrate
from slowwave.tasks.claim import Due
from slowwave.tasks.consolidate import (
    RunPolicy,
    RunSteps,
    Scope,
    ShardSpec,
    ShardWork,
    drive_run,
    plan_run,
    run_shard,
)
from slowwave.tasks.forget import resolve_conversations
from slowwave.tasks.profile import ProfilePolicy, profile_run
from slowwave.tasks.transient import is_transient


def _transient(task: Any, task_run: Any, state: State) -> bool:
    """Retry what a restart fixes: lost connections, dead actors, timeouts."""
    try:
        state.result()
    except Exception as exc:
        return is_transient(exc)
    return False


@task(
    name="plan",
    task_run_name="plan",
    cache_policy=NONE,
    retries=3,
    retry_delay_seconds=exponential_backoff(backoff_factor=5),
    retry_condition_fn=_transient,
)
def plan_task(
    db: Database, summary: RunSummary, policy: RunPolicy, scope: Scope, shard_conversations: int
) -> tuple[list[ShardSpec], Due]:
    """Count what is due (nothing claimed or read) and cut it into shards."""
    return plan_run(db, summary, policy, scope, shard_conversations)


@task(
    name="consolidate shard",
    task_run_name="consolidate shard {shard.spec.index}",
    cache_policy=NONE,
    # 15, 30, 60, 120 s: long enough for a crashed engine's actor to restart (about 75 s for
    # the CPU model here, minutes for a large model on a GPU)
    retries=4,
    retry_delay_seconds=exponential_backoff(backoff_factor=15),
    retry_condition_fn=_transient,
)
def shard_task(
    settings: Settings,
    shard: ShardWork,
    model: StructuredModel,
    embedder: Embedder,
    progress: Callable[[int], None] | None = None,
) -> RunSummary:
    """Claim the shard's conversations and consolidate them as chains
    (``tasks.consolidate.run_shard``), on connections of its own. A Prefect retry after a
    transient failure goes on where the failed attempt stopped (the shard keeps its claim and
    counts); Ray itself never re-runs a shard (``flows.runners.spread``)."""
    try:
        with Database(settings) as db:
            policy = RunPolicy.of(settings, model)
            summary = run_shard(db, shard, model, embedder, policy, after_step=progress)
    except Exception as exc:
        # what the shard did before it failed travels with the error (from a Ray worker too)
        exc.shard_summary = shard.summary  # type: ignore[attr-defined]
        raise
    summary.placement.pop("shards", None)  # a retry counts the shard once
    summary.place("shards", [current_node()])
    return summary


@task(name="profile", task_run_name="profile", cache_policy=NONE)
def profile_task(
    db: Database, model: StructuredModel, summary: RunSummary, policy: ProfilePolicy
) -> None:
    """Rewrite the profiles of the conversations the run changed, one model call for all.
    No retries: a failed answer leaves the profile stale for the next run, never fails this
    one."""
    profile_run(db, model, summary, policy)


@dataclass
class Progress:
    """The run's progress artifact in conversations done, moved on at most every few seconds:
    as shards on threads finish conversations, or as shards on Ray finish."""

    total: int
    interval_s: float = 2.0
    done: int = 0
    artifact: Any = None
    _shown: float = field(default=0.0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def finish(self) -> None:
        """Every planned conversation is settled (claimed and done, or taken by no shard)."""
        with self._lock:
            self.done = self.total
        update_progress_artifact(self.artifact, 100.0)

    def __call__(self, finished: int) -> None:
        with self._lock:
            self.done += finished
            now = time.monotonic()
            if self.done < self.total and now - self._shown < self.interval_s:
                return
            self._shown = now
            share = 100.0 * min(self.done, self.total) / self.total if self.total else 100.0
        update_progress_artifact(self.artifact, share)


def summary_table(summary: RunSummary) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"measure": label.strip(), "value": value} for label, value in summary.counter_rows()
    ]
    rows += [{"measure": f"seconds in {k}", "value": v} for k, v in summary.stage_seconds.items()]
    rows += [
        {
            "measure": f"similarity to the nearest fact, {action} decisions (count, mean)",
            "value": f"{h.count}, {h.total / h.count:.3f}" if h.count else "0",
        }
        for action, h in sorted(summary.similarity.items())
    ]
    return rows


def publish(summary: RunSummary) -> None:
    """The run's summary table, and a warning listing failed conversations if any."""
    create_table_artifact(
        table=summary_table(summary),
        key="slowwave-run-summary",
        description=f"slowwave {summary.kind} run `{summary.run_id}`: {summary.status}",
    )
    if summary.failures:
        lines = [
            f"# {len(summary.failures)} chunk(s) failed",
            "",
            "| conversation | episodes | state | reason |",
            "|---|---|---|---|",
        ]
        for f in summary.failures[:200]:
            state = "quarantined" if f.quarantined else "retried next run"
            reason = f.reason.replace("|", "\\|")[:300]
            ref = conversation_ref(f.conversation_id)  # Prefect keeps no conversation id
            lines.append(f"| {ref} | {f.episodes} | {state} | {reason} |")
        create_markdown_artifact(
            markdown="\n".join(lines),
            key="slowwave-run-failures",
            description="Conversations whose chunks failed in this run",
        )


class FlowSteps(RunSteps):
    """The run's steps as the flow runs them: the plan, each shard and the profiles as Prefect
    tasks (their states, retries and times in the UI), the shards at once on threads or Ray
    workers, and a progress artifact."""

    def __init__(
        self, settings: Settings, model: StructuredModel, embedder: Embedder | None
    ) -> None:
        super().__init__(model, embedder)
        self.settings = settings
        self.progress = Progress(total=0)

    def prepare(self, summary: RunSummary) -> None:
        self._embedder = self._embedder or load_embedder(self.settings)
        summary.place("embedding", actor_nodes(self.embedder))
        summary.place("llm", actor_nodes(self.model))
        check_shareable(self.settings, self.model, self.embedder)

    def plan(
        self, db: Database, summary: RunSummary, policy: RunPolicy, scope: Scope, size: int
    ) -> tuple[list[ShardSpec], Due]:
        return plan_task(db, summary, policy, scope, size)

    def planned(self, due: Due, specs: Sequence[ShardSpec]) -> None:
        self.progress = Progress(total=due.conversations)
        self.progress.artifact = create_progress_artifact(
            0.0,
            key="slowwave-progress",
            description=f"{due.conversations} conversations, {due.episodes} episodes",
        )
        get_run_logger().info(
            "%d conversations due (%d episodes), in %d shard(s)",
            due.conversations,
            due.episodes,
            len(specs),
        )

    def shards(
        self,
        db: Database,
        specs: Sequence[ShardSpec],
        scope: Scope,
        policy: RunPolicy,
        summary: RunSummary,
    ) -> None:
        # shards use connections of their own, to the server this run uses
        shard_settings = self.settings.model_copy(update={"database_url": SecretStr(db.url)})
        run_shards(shard_settings, specs, scope, self.model, self.embedder, summary, self.progress)

    def profiles(self, db: Database, summary: RunSummary, policy: ProfilePolicy) -> None:
        profile_task(db, self.model, summary, policy)


def consolidate_run(
    settings: Settings,
    *,
    kind: str,
    conversations: list[str] | None = None,
    model: StructuredModel | None = None,
    embedder: Embedder | None = None,
) -> RunSummary:
    """The body of the nightly and backfill flows (call it inside a flow): ``drive_run`` with
    the flow's steps, then the run's summary published."""
    own_model, own_embedder = model is None, embedder is None
    with Database(settings) as db:
        migrate(db)
        if conversations is not None:  # references (c:…) from the CLI: ids from here on
            with db.connection() as conn:
                conversations = resolve_conversations(conn, conversations)
        model = model or load_model(settings)
        steps = FlowSteps(settings, model, embedder)
        try:
            summary = drive_run(
                db,
                settings,
                steps,
                kind=kind,
                conversations=conversations,
                flow_run_id=str(flow_run.get_id() or ""),
            )
        finally:
            if own_model:
                model.close()
            if own_embedder and steps.loaded_embedder is not None:
                steps.loaded_embedder.close()
    publish(summary)
    return summary


def run_shards(
    settings: Settings,
    specs: Sequence[ShardSpec],
    scope: Scope,
    model: StructuredModel,
    embedder: Embedder,
    summary: RunSummary,
    progress: Progress,
) -> None:
    """The shards as Prefect tasks, at most ``shard_concurrency`` at once; each one's summary
    merged into the run's as it ends. After a shard fails for good no new one starts, those
    running finish, and the first failure is raised (their claims are released by the run)."""
    local = not settings.ray_address  # shards on threads share the progress artifact
    queued = deque(ShardWork(spec, scope) for spec in specs)
    running: dict[PrefectFuture[RunSummary], ShardWork] = {}
    failure: BaseException | None = None
    with shard_runner(settings) as runner:
        while running or (queued and failure is None):
            while queued and failure is None and len(running) < settings.shard_concurrency:
                shard = queued.popleft()
                parameters = {
                    "settings": settings,
                    "shard": shard,
                    "model": model,
                    "embedder": embedder,
                    "progress": progress if local else None,
                }
                with spread(settings):
                    running[runner.submit(shard_task, parameters)] = shard
            done = next(as_completed(list(running)))
            shard = running.pop(done)
            try:
                result = done.result()
            except BaseException as exc:
                failure = failure or exc
                done_before = getattr(exc, "shard_summary", None) or shard.summary
                if done_before is not None:  # what the shard did before it failed
                    summary.merge(done_before)
                continue
            summary.merge(result)
            if not local:
                progress(result.conversations)
    if failure is not None:
        raise failure
    progress.finish()


def final_state(summary: RunSummary, **extra: Any) -> State:
    """Completed unless nothing could be done; the summary (and ``extra``) as its data."""
    data = {**summary.model_dump(mode="json"), **extra}
    if summary.chunks and summary.chunks_failed == summary.chunks:
        return Failed(message=f"all {summary.chunks} chunk(s) failed", data=data)
    message = "completed" if not summary.failures else f"{summary.chunks_failed} chunk(s) failed"
    return Completed(message=message, data=data)


def nightly_run_name() -> str:
    """``nightly 2026-11-22`` (the scheduled day), so last night's run is found at a glance;
    a run that names its conversations says how many."""
    day = flow_run.get_scheduled_start_time().strftime("%Y-%m-%d")
    named = flow_run.get_parameters().get("conversations")
    return f"nightly {day}" + (f" ({len(named)} conversations)" if named else "")


@flow(name="slowwave-nightly", flow_run_name=nightly_run_name, log_prints=True)
def nightly(conversations: list[str] | None = None) -> State:
    """Consolidate every conversation that is due (optionally only some: their references,
    ``c:…``, which Prefect may keep, or their ids)."""
    summary = consolidate_run(get_settings(), kind="nightly", conversations=conversations)
    return final_state(summary)
