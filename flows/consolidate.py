"""The nightly consolidation flow: what slowwave's users schedule and watch in the Prefect UI.

Claims the due conversations (a Prefect task), cuts them into shards
(``SLOWWAVE_SHARD_CONVERSATIONS``) and runs a Prefect task per shard — never one per
conversation or per chunk: a task costs milliseconds on threads and far more on Ray. Inside a
shard every conversation is a chain (``tasks.chains``): its chunk k+1 is opened only after
chunk k is applied, and is submitted to the runtime pools (vLLM / embedding Ray actors,
created once per run) the moment it is, so the engine is fed continuously. The stages
interleave across conversations, so they are timed inside the shard and reported per stage
in the run's summary artifact.

Transient failures (an engine restart, a dropped connection) are retried with backoff; poison
work is quarantined by the core and listed. The run ends Completed — with a warning artifact
when some conversations failed — and Failed only when nothing could be done.
"""

from __future__ import annotations

import time
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
from prefect.runtime import flow_run
from prefect.states import Completed, Failed, State
from prefect.tasks import exponential_backoff

from models.embedding import load_embedder
from models.embedding.base import Embedder
from models.llm import load_model
from models.llm.base import StructuredModel
from models.run import RunSummary
from models.settings import Settings, get_settings
from sql.db import Database, migrate
from tasks.chains import Backlog
from tasks.claim import ConversationWork
from tasks.consolidate import RunPolicy, claim_run, consolidate_shard, takes_everything
from tasks.runs import recorded_run
from tasks.transient import is_transient


def _transient(task: Any, task_run: Any, state: State) -> bool:
    """Retry what a restart fixes: lost connections, dead actors, timeouts."""
    try:
        state.result()
    except Exception as exc:
        return is_transient(exc)
    return False


@task(
    name="claim",
    cache_policy=NONE,
    retries=3,
    retry_delay_seconds=exponential_backoff(backoff_factor=5),
    retry_condition_fn=_transient,
)
def claim_task(
    db: Database,
    summary: RunSummary,
    policy: RunPolicy,
    conversations: list[str] | None,
    everything: bool,
) -> list[ConversationWork]:
    return claim_run(db, summary, policy, conversations=conversations, everything=everything)


@task(
    name="consolidate shard",
    task_run_name="consolidate shard {shard}",
    cache_policy=NONE,
    # 15, 30, 60, 120 s: long enough for a crashed engine's actor to restart (about 75 s for
    # the CPU model here, minutes for a large model on a GPU)
    retries=4,
    retry_delay_seconds=exponential_backoff(backoff_factor=15),
    retry_condition_fn=_transient,
)
def shard_task(
    db: Database,
    backlog: Backlog,
    model: StructuredModel,
    embedder: Embedder,
    policy: RunPolicy,
    summary: RunSummary,
    shard: int,
    progress: Callable[[int], None],
) -> None:
    """The shard's conversations as chains (``tasks.consolidate.consolidate_shard``). A retry
    after a transient failure goes on where the failed attempt stopped."""
    consolidate_shard(db, backlog, model, embedder, policy, summary, after_step=progress)


def shards_of(work: Sequence[ConversationWork], size: int) -> list[list[ConversationWork]]:
    return [list(work[i : i + size]) for i in range(0, len(work), size)]


@dataclass
class Progress:
    """The run's progress artifact, moved on as chunks are applied (at most every few s)."""

    total: int
    interval_s: float = 2.0
    done: int = 0
    artifact: Any = None
    _shown: float = field(default=0.0, init=False)

    def __call__(self, applied: int) -> None:
        self.done += applied
        now = time.monotonic()
        if self.done >= self.total or now - self._shown >= self.interval_s:
            self._shown = now
            update_progress_artifact(self.artifact, 100.0 * min(self.done, self.total) / self.total)


def summary_table(summary: RunSummary) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"measure": label.strip(), "value": value} for label, value in summary.counter_rows()
    ]
    rows += [{"measure": f"seconds in {k}", "value": v} for k, v in summary.stage_seconds.items()]
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
            lines.append(f"| {f.conversation_id} | {f.episodes} | {state} | {reason} |")
        create_markdown_artifact(
            markdown="\n".join(lines),
            key="slowwave-run-failures",
            description="Conversations whose chunks failed in this run",
        )


def consolidate_run(
    settings: Settings,
    *,
    kind: str,
    conversations: list[str] | None = None,
    model: StructuredModel | None = None,
    embedder: Embedder | None = None,
) -> RunSummary:
    """The body of the nightly and backfill flows (call it inside a flow)."""
    logger = get_run_logger()
    own_model, own_embedder = model is None, embedder is None
    with Database(settings) as db:
        migrate(db)
        flow_run_id = str(flow_run.get_id() or "")
        model = model or load_model(settings)
        try:
            with recorded_run(
                db, kind=kind, flow_run_id=flow_run_id, lease_s=settings.claim_lease_s
            ) as summary:
                policy = RunPolicy.of(settings, model)  # a budget that cannot work is recorded
                embedder = embedder or load_embedder(settings)
                everything = takes_everything(kind, conversations)
                work = claim_task(db, summary, policy, conversations, everything)
                shards = shards_of(work, settings.shard_conversations)
                progress = Progress(total=sum(len(w.chunks) for w in work) or 1)
                progress.artifact = create_progress_artifact(
                    0.0,
                    key="slowwave-progress",
                    description=f"{len(work)} conversations, {progress.total} chunks",
                )
                logger.info("claimed %d conversations in %d shard(s)", len(work), len(shards))
                for index, shard in enumerate(shards):
                    backlog = Backlog.of(shard)
                    shard_task(db, backlog, model, embedder, policy, summary, index, progress)
        finally:
            if own_model:
                model.close()
            if own_embedder and embedder is not None:
                embedder.close()
    publish(summary)
    return summary


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
    """Consolidate every conversation that is due (optionally only some)."""
    summary = consolidate_run(get_settings(), kind="nightly", conversations=conversations)
    return final_state(summary)
