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
work is quarantined by the core and listed. The run ends Completed only when every chunk went
through; a run in which some failed ends Failed, named ``CompletedWithFailures``, tagged, with
a WARNING line per failed conversation and a warning artifact (conversations by reference).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

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

from slowwave.flows.runners import check_shareable, lost_shard, shard_runner, spread
from slowwave.models import interrupt
from slowwave.models.embedding import load_embedder
from slowwave.models.embedding.base import Embedder
from slowwave.models.ids import conversation_ref
from slowwave.models.llm import load_model
from slowwave.models.llm.base import StructuredModel
from slowwave.models.run import RunRequest, RunSummary
from slowwave.models.settings import ConsolidationSettings, Settings, get_settings
from slowwave.models.tenant import DEFAULT_TENANT
from slowwave.models.warmup import started_ahead_for, take
from slowwave.models.workers.cluster import current_node
from slowwave.models.workers.pool import actor_nodes
from slowwave.sql.db import Database, migrate
from slowwave.tasks.claim import Due
from slowwave.tasks.consolidate import (
    RunSteps,
    Scope,
    ShardSpec,
    ShardWork,
    drive_run,
    plan_run,
    run_shard,
)
from slowwave.tasks.forget import resolve_conversations
from slowwave.tasks.ingest.summarize import SummaryReport
from slowwave.tasks.pipeline import RunPolicy
from slowwave.tasks.profile import profile_run
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
    # the waits between tries are the run's settings' (`retrying`)
    retries=4,
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
        if shard.summary is not None and is_transient(exc):  # Prefect retries it: say after what
            what = " ".join(str(exc).split())[:200]
            shard.summary.shard_retries.append(
                f"shard {shard.spec.index}: {type(exc).__name__}: {what}"
            )
        # what the shard did before it failed travels with the error (from a Ray worker too)
        exc.shard_summary = shard.summary  # type: ignore[attr-defined]
        raise
    summary.placement.pop("shards", None)  # a retry counts the shard once
    summary.place("shards", [current_node()])
    return summary


@task(name="profile", task_run_name="profile", cache_policy=NONE)
def profile_task(
    db: Database, model: StructuredModel, summary: RunSummary, policy: ConsolidationSettings
) -> None:
    """Rewrite the profiles of the conversations the run changed, one model call for all.
    No retries: a failed answer leaves the profile stale for the next run, never fails this
    one."""
    profile_run(db, model, summary, policy)


@contextmanager
def reported(what: str) -> Iterator[None]:
    """Log ``what`` as it starts and how long it took: a model's load or an engine's start-up
    is told as what it is, not folded into the next task's time."""
    logger = get_run_logger()
    logger.info("%s…", what)
    start = time.perf_counter()
    yield
    logger.info("%s: done in %.1f s", what, time.perf_counter() - start)


def start_model(settings: Settings) -> StructuredModel:
    """The configured language model, its start-up (an engine, a server) logged as such; the
    one this process started ahead of the flow, when it did (``models.warmup``)."""
    model = settings.openai.model if settings.llm.runtime == "openai" else settings.llm.model
    what = f"starting the language model ({settings.llm.runtime}, {model})"
    started: StructuredModel = ahead_or_start(
        "model", f"{what}, started ahead of the flow", what, settings, load_model
    )
    return started


def ahead_or_start(
    name: str, ahead: str, what: str, settings: Settings, start: Callable[[Settings], Any]
) -> Any:
    """The runtime this process started ahead of the flow (``models.warmup``), logged as
    ``ahead``; else ``start(settings)``, logged as ``what``."""
    if started_ahead_for(name):
        with reported(ahead):
            runtime = take(name, settings)
        if runtime is not None:
            return runtime
    with reported(what):
        return start(settings)


@dataclass
class Progress:
    """The run's progress in conversations done: its artifact moved on at most every
    ``interval_s``, and a log line (in the UI and the terminal of a local run) at most every
    ``log_interval_s``, as shards on threads finish conversations, or as shards on Ray
    finish."""

    total: int
    interval_s: float = 2.0
    log_interval_s: float = 10.0
    done: int = 0
    artifact: Any = None
    logger: Any = None
    _shown: float = field(default=0.0, init=False)
    _logged: float = field(default_factory=time.monotonic, init=False)
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
            if self.logger is not None and finished and now - self._logged >= self.log_interval_s:
                self._logged = now
                self.logger.info("%d of %d conversations done", self.done, self.total)
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
    """The run's summary table; when chunks failed, a warning artifact listing them, a WARNING
    log line per conversation and the run's tags (``failures``, ``quarantined``), each naming
    conversations by reference only (Prefect's store is out of a forget's reach)."""
    create_table_artifact(
        table=summary_table(summary),
        key="slowwave-run-summary",
        description=f"slowwave {summary.kind} run `{summary.run_id}`: {summary.status}",
    )
    if not summary.failures:
        return
    failed = failed_conversations(summary)
    lines = [
        f"# {summary.chunks_failed} chunk(s) of {len(failed)} conversation(s) failed",
        "",
        "Quarantined episodes wait for `slowwave quarantine release`; the others are taken "
        "again by the next run. A conversation is named by its reference: "
        "`slowwave quarantine list` shows its id.",
        "",
    ]
    for ref, failure in failed.items():
        lines.append(f"- **{ref}**: {failure}")
    create_markdown_artifact(
        markdown="\n".join(lines),
        key="slowwave-run-failures",
        description="Conversations whose chunks failed in this run",
    )
    logger = get_run_logger()
    for ref, failure in list(failed.items())[:FAILURES_LOGGED]:
        logger.warning("conversation %s: %s", ref, failure)
    if len(failed) > FAILURES_LOGGED:
        logger.warning("and %d more conversations failed", len(failed) - FAILURES_LOGGED)
    tag_run("failures", *(["quarantined"] if summary.episodes_quarantined else []))


# WARNING lines a run logs for its failed conversations, at most (the artifact has them all)
FAILURES_LOGGED = 50


def failed_conversations(summary: RunSummary) -> dict[str, str]:
    """Each failed conversation's reference and what happened to it, its reasons whole."""
    by_ref: dict[str, list[str]] = {}
    for f in summary.failures:
        state = "quarantined" if f.quarantined else "taken again next run"
        line = f"{f.episodes} episode(s) {state}: {f.reason}"
        by_ref.setdefault(conversation_ref(f.conversation_id), []).append(line)
    return {ref: "; ".join(lines) for ref, lines in by_ref.items()}


def tag_run(*tags: str) -> None:
    """Add ``tags`` to the current flow run (searchable and shown in the UI's runs list)."""
    from uuid import UUID

    from prefect.client.orchestration import get_client

    current_id = flow_run.get_id()
    if current_id is None:
        return
    run_id = UUID(current_id)
    with get_client(sync_client=True) as client:
        current = client.read_flow_run(run_id)
        client.update_flow_run(run_id, tags=sorted({*current.tags, *tags}))


class FlowSteps(RunSteps):
    """The run's steps as the flow runs them: the plan, each shard and the profiles as Prefect
    tasks (their states, retries and times in the UI), the shards at once on threads or Ray
    workers, and a progress artifact."""

    def __init__(
        self,
        settings: Settings,
        model: StructuredModel,
        embedder: Embedder | None,
        summaries: SummaryReport | None = None,
    ) -> None:
        super().__init__(model, embedder, summaries)
        self.settings = settings
        self.progress = Progress(total=0)

    def prepare(self, summary: RunSummary) -> None:
        super().prepare(summary)  # the backfill's summaries are part of what it cost
        if self._embedder is None:
            what = f"loading the embedding model {self.settings.embedding.model}"
            self._embedder = ahead_or_start(
                "embedder", f"{what}, loaded ahead of the flow", what, self.settings, load_embedder
            )
        summary.place("embedding", actor_nodes(self.embedder))
        summary.place("llm", actor_nodes(self.model))
        check_shareable(self.settings, self.model, self.embedder)

    def plan(
        self, db: Database, summary: RunSummary, policy: RunPolicy, scope: Scope, size: int
    ) -> tuple[list[ShardSpec], Due]:
        return plan_task(db, summary, policy, scope, size)

    def planned(self, due: Due, specs: Sequence[ShardSpec]) -> None:
        self.progress = Progress(total=due.conversations, logger=get_run_logger())
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
        shard_settings = self.settings.evolve(database_url=SecretStr(db.url))
        run_shards(shard_settings, specs, scope, self.model, self.embedder, summary, self.progress)

    def profiles(self, db: Database, summary: RunSummary, policy: ConsolidationSettings) -> None:
        profile_task(db, self.model, summary, policy)


def consolidate_run(
    settings: Settings,
    *,
    kind: str,
    conversations: list[str] | None = None,
    model: StructuredModel | None = None,
    embedder: Embedder | None = None,
    summaries: SummaryReport | None = None,
    request: RunRequest | None = None,
) -> RunSummary:
    """The body of the nightly and backfill flows (call it inside a flow): ``drive_run`` with
    the flow's steps, then the run's summary published. ``summaries``: what writing the
    episodes' summaries before the run cost, counted in its calls and tokens; ``request``: a
    run a key asked for (its id, already given to it)."""
    own_model, own_embedder = model is None, embedder is None
    with Database(settings) as db:
        migrate(db)
        if conversations is not None:  # references (c:…) from the CLI: ids from here on
            with db.connection() as conn:
                conversations = resolve_conversations(conn, conversations)
        model = model or start_model(settings)
        steps = FlowSteps(settings, model, embedder, summaries)
        try:
            summary = drive_run(
                db,
                settings,
                steps,
                kind=kind,
                conversations=conversations,
                flow_run_id=str(flow_run.get_id() or ""),
                request=request,
            )
        finally:
            if own_model:
                model.close()
            if own_embedder and steps.loaded_embedder is not None:
                steps.loaded_embedder.close()
    publish(summary)
    return summary


def retrying(settings: Settings) -> Any:
    """The shard task with its retries' waits from ``settings``: the first one
    ``shard_retry_delay_seconds``, doubled at each retry."""
    first = settings.orchestration.shard_retry_delay_seconds
    return shard_task.with_options(retry_delay_seconds=exponential_backoff(backoff_factor=first))


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
    local = not settings.ray.address  # shards on threads share the progress artifact
    queued = deque(ShardWork(spec, scope) for spec in specs)
    running: dict[PrefectFuture[RunSummary], ShardWork] = {}
    failure: BaseException | None = None
    task = retrying(settings)
    with shard_runner(settings) as runner, interrupt.stops_threads():
        while running or (queued and failure is None):
            while (
                queued
                and failure is None
                and len(running) < settings.orchestration.shard_concurrency
            ):
                shard = queued.popleft()
                parameters = {
                    "settings": settings,
                    "shard": shard,
                    "model": model,
                    "embedder": embedder,
                    "progress": progress if local else None,
                }
                with spread(settings):
                    running[runner.submit(task, parameters)] = shard
            done = next(as_completed(list(running)))
            shard = running.pop(done)
            try:
                result = done.result()
            except BaseException as exc:
                failure = failure or lost_shard(exc, shard.spec.index)
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
    """Completed when every chunk went through; otherwise a Failed state (red in the UI and
    on the deployment's activity bar, and what Prefect's failure automations watch): named
    ``CompletedWithFailures`` when some chunks were applied, plain Failed when none could be.
    The summary (and ``extra``) is its data either way."""
    data = {**summary.model_dump(mode="json"), **extra}
    if summary.chunks and summary.chunks_failed == summary.chunks:
        return Failed(message=f"all {summary.chunks} chunk(s) failed", data=data)
    if summary.failures:
        conversations = len({f.conversation_id for f in summary.failures})
        message = (
            f"{summary.chunks_failed} of {summary.chunks} chunk(s) failed, in {conversations} "
            f"conversation(s); {summary.episodes_quarantined} episode(s) quarantined"
        )
        return Failed(name="CompletedWithFailures", message=message, data=data)
    return Completed(message="completed", data=data)


def nightly_run_name() -> str:
    """``nightly 2026-11-22`` (the scheduled day), so last night's run is found at a glance;
    a run that names its conversations says how many."""
    day = flow_run.get_scheduled_start_time().strftime("%Y-%m-%d")
    named = flow_run.get_parameters().get("conversations")
    return f"nightly {day}" + (f" ({len(named)} conversations)" if named else "")


@flow(name="slowwave-nightly", flow_run_name=nightly_run_name, log_prints=True)
def nightly(
    conversations: list[str] | None = None,
    run_id: UUID | None = None,
    requested_by: str | None = None,
) -> State:
    """Consolidate every conversation that is due (optionally only some: their references,
    ``c:…``, which Prefect may keep, or their ids: all their pending episodes). ``run_id`` and
    ``requested_by``: a run a key asked for (POST /v1/conversations/{id}/consolidate), its id
    given to it already."""
    request = RunRequest(run_id, requested_by or DEFAULT_TENANT) if run_id else None
    summary = consolidate_run(
        get_settings(),
        kind="now" if request else "nightly",
        conversations=conversations,
        request=request,
    )
    return final_state(summary)


def soon_run_name() -> str:
    return "soon " + flow_run.get_scheduled_start_time().strftime("%Y-%m-%d %H:%M")


@flow(name="slowwave-soon", flow_run_name=soon_run_name, log_prints=True)
def soon() -> State:
    """Facts within minutes, beside the nightly run: consolidate what is due under the seed's
    triggers now, as the nightly run would, but only episodes that are closed (their
    conversation quiet for SLOWWAVE_SEGMENT_GAP_S): a conversation still talking is left for a
    later run. The claims split the work with a nightly run at the same time."""
    summary = consolidate_run(get_settings(), kind="soon")
    return final_state(summary)
