"""A consolidation run: the one order every run follows, for the flows and in process.

``drive_run`` records the run, builds its ``RunPolicy``, plans its shards from a count of what
is due, and runs each shard (``run_shard``: it claims its own conversations, then
``tasks.pipeline.consolidate_shard`` takes them through the stages as chains), then counts what
it leaves pending and refreshes the profiles. ``RunSteps`` says how the steps execute: in this
process (``consolidate``: tests, benchmarks and embedding applications), or as Prefect tasks
(``slowwave.flows.consolidate.FlowSteps``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from uuid import UUID

from slowwave.models import faultpoints, interrupt
from slowwave.models.embedding.base import Embedder
from slowwave.models.llm.base import StructuredModel
from slowwave.models.run import RunRequest, RunSummary
from slowwave.models.settings import ConsolidationSettings, Settings
from slowwave.sql.db import Database
from slowwave.tasks.chains import Backlog
from slowwave.tasks.claim import Due, claim, close_open, count_due, left_pending
from slowwave.tasks.ingest.summarize import SummaryReport
from slowwave.tasks.pipeline import RunPolicy, consolidate_shard, timed
from slowwave.tasks.profile import profile_run
from slowwave.tasks.runs import recorded_run


@dataclass(frozen=True)
class Scope:
    """What a run consolidates: its id and kind, and which pending episodes count as due."""

    run_id: UUID
    kind: str
    conversations: tuple[str, ...] | None = None
    everything: bool = False

    @classmethod
    def of(cls, summary: RunSummary, conversations: Sequence[str] | None) -> Scope:
        return cls(
            summary.run_id,
            summary.kind,
            tuple(conversations) if conversations is not None else None,
            takes_everything(summary.kind, conversations),
        )

    @property
    def named(self) -> list[str] | None:
        return list(self.conversations) if self.conversations is not None else None


@dataclass(frozen=True)
class ShardSpec:
    """A shard as planned: its number in the run and the most conversations it claims."""

    index: int
    max_conversations: int


def shard_specs(due: int, shard_conversations: int) -> list[ShardSpec]:
    """``due`` conversations in shards of ``shard_conversations`` (the last one smaller)."""
    return [
        ShardSpec(i, min(shard_conversations, due - start))
        for i, start in enumerate(range(0, due, shard_conversations))
    ]


def plan_run(
    db: Database, summary: RunSummary, policy: RunPolicy, scope: Scope, shard_conversations: int
) -> tuple[list[ShardSpec], Due]:
    """The run's shards, from a count of what is due (nothing claimed or read), and the count:
    each shard claims its own when it starts, so the run never holds its whole backlog."""
    with timed(summary, "plan"), db.connection() as conn:
        due = count_due(
            conn,
            scope.run_id,
            policy.claim,
            conversations=scope.named,
            everything=scope.everything,
        )
    return shard_specs(due.conversations, shard_conversations), due


@dataclass
class ShardWork:
    """One shard of a run: it claims its conversations the first time it runs and keeps them,
    with its counts, so a retry after a transient failure goes on where it stopped."""

    spec: ShardSpec
    scope: Scope
    backlog: Backlog | None = None
    summary: RunSummary | None = None


def claim_shard(db: Database, shard: ShardWork, policy: RunPolicy) -> Backlog:
    """Claim the shard's conversations (at most its planned number), in chunks within the
    policy's budget; count them in the shard's summary."""
    assert shard.summary is not None
    with timed(shard.summary, "claim"), db.connection() as conn:
        work = claim(
            conn,
            shard.scope.run_id,
            policy.claim,
            conversations=shard.scope.named,
            everything=shard.scope.everything,
            budget=policy.budget,
            shard=shard.spec.index,
            max_conversations=shard.spec.max_conversations,
        )
    shard.summary.conversations += len(work)
    shard.summary.episodes_quarantined += sum(w.quarantined for w in work)
    return Backlog.of(work)


def run_shard(
    db: Database,
    shard: ShardWork,
    model: StructuredModel,
    embedder: Embedder,
    policy: RunPolicy,
    *,
    after_step: Callable[[int], None] | None = None,
) -> RunSummary:
    """Claim (once) and consolidate one shard; its own summary, for the run to merge.
    ``after_step(n)``: ``n`` more of its conversations are done."""
    if shard.summary is None:
        shard.summary = RunSummary(
            run_id=shard.scope.run_id, kind=shard.scope.kind, started_at=datetime.now(UTC)
        )
        shard.summary.shards = 1
    if shard.backlog is None:
        shard.backlog = claim_shard(db, shard, policy)
    consolidate_shard(
        db, shard.backlog, model, embedder, policy, shard.summary, after_step=after_step
    )
    return shard.summary


def count_left_pending(db: Database, summary: RunSummary, policy: RunPolicy, scope: Scope) -> None:
    """Count, by reason, what the run leaves pending (once its shards are done); timed with
    the plan, the other count of a run."""
    with timed(summary, "plan"), db.connection() as conn:
        left = left_pending(
            conn, scope.run_id, policy.claim, conversations=scope.named, everything=scope.everything
        )
    summary.episodes_held_elsewhere = left.held
    summary.episodes_not_due = left.not_due
    summary.episodes_over_cap = left.over_cap
    summary.episodes_open = left.open
    summary.episodes_left_quarantined = left.quarantined


def close_named(db: Database, summary: RunSummary, policy: RunPolicy, scope: Scope) -> None:
    """A run that names its conversations was asked for them now: their open episodes are
    closed (and committed) before anything is planned, so that what was said up to this moment
    is consolidated; timed with the plan."""
    if scope.conversations is None:
        return
    with timed(summary, "plan"), db.connection() as conn:
        summary.episodes_closed = close_open(conn, scope.conversations, policy.claim.open_s)
        faultpoints.reached("close.after", conn)


def takes_everything(kind: str, conversations: Sequence[str] | None) -> bool:
    """A backfill, or a run that names its conversations, takes every pending episode of
    them; only an unnamed nightly-style run waits for conversations to become due."""
    return kind == "backfill" or conversations is not None


class RunSteps:
    """How the steps of a run execute. These defaults run them in this process, the shards one
    after another (tests, benchmarks, embedding programs); the nightly and backfill flows run
    them as Prefect tasks (``slowwave.flows.consolidate.FlowSteps``). Either way ``drive_run``
    is the one order of a run."""

    def __init__(
        self,
        model: StructuredModel,
        embedder: Embedder | None,
        summaries: SummaryReport | None = None,
    ) -> None:
        self.model = model
        self._embedder = embedder
        self.summaries = summaries

    @property
    def loaded_embedder(self) -> Embedder | None:
        """The embedder, if one was given or loaded (to close it after)."""
        return self._embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            raise RuntimeError("the run's embedder is loaded by prepare()")
        return self._embedder

    def prepare(self, summary: RunSummary) -> None:
        """Inside the recorded run, before anything is planned (what fails here is recorded):
        a backfill's summaries, written before the run, are counted in what it cost."""
        if self.summaries is not None:
            spent = self.summaries
            summary.model_calls += spent.summarized + spent.failed
            summary.prompt_tokens += spent.prompt_tokens
            summary.completion_tokens += spent.completion_tokens
            summary.prompt_tokens_cached += spent.cached_tokens

    def plan(
        self, db: Database, summary: RunSummary, policy: RunPolicy, scope: Scope, size: int
    ) -> tuple[list[ShardSpec], Due]:
        return plan_run(db, summary, policy, scope, size)

    def planned(self, due: Due, specs: Sequence[ShardSpec]) -> None:
        """What is due is known, before any shard starts."""

    def shards(
        self,
        db: Database,
        specs: Sequence[ShardSpec],
        scope: Scope,
        policy: RunPolicy,
        summary: RunSummary,
    ) -> None:
        """Every shard; each one's summary merged into the run's, a failed one's too."""
        for spec in specs:
            shard = ShardWork(spec, scope)
            try:
                run_shard(db, shard, self.model, self.embedder, policy)
            finally:
                if shard.summary is not None:
                    summary.merge(shard.summary)

    def profiles(self, db: Database, summary: RunSummary, policy: ConsolidationSettings) -> None:
        profile_run(db, self.model, summary, policy)


def drive_run(
    db: Database,
    settings: Settings,
    steps: RunSteps,
    *,
    kind: str,
    conversations: Sequence[str] | None = None,
    flow_run_id: str | None = None,
    request: RunRequest | None = None,
) -> RunSummary:
    """A whole run, the one order every run follows: recorded (its row, its leases renewed,
    its claims released and its outcome stored whatever happens) → its policy → what it
    consolidates (the open episodes of the conversations it names, closed) → a plan of shards
    from a count of what is due → the shards, each claiming its own conversations → what it
    leaves pending, counted → the conversations' profiles."""
    interrupt.clear()  # an interrupt of an earlier run in this process is not this one's
    with recorded_run(
        db,
        kind=kind,
        flow_run_id=flow_run_id,
        lease_s=settings.consolidation.claim_lease_s,
        request=request,
    ) as summary:
        policy = RunPolicy.of(
            settings, steps.model
        )  # inside: a budget that cannot work is recorded
        if kind == "soon":  # only conversations quiet for the segmentation gap
            policy = replace(policy, claim=replace(policy.claim, quiet=True))
        steps.prepare(summary)
        scope = Scope.of(summary, conversations)
        close_named(db, summary, policy, scope)
        specs, due = steps.plan(
            db, summary, policy, scope, settings.orchestration.shard_conversations
        )
        steps.planned(due, specs)
        steps.shards(db, specs, scope, policy, summary)
        count_left_pending(db, summary, policy, scope)
        if policy.consolidation.profiles:
            steps.profiles(db, summary, policy.consolidation)
    return summary


def consolidate(
    db: Database,
    model: StructuredModel,
    embedder: Embedder,
    settings: Settings,
    *,
    kind: str = "manual",
    conversations: Sequence[str] | None = None,
    flow_run_id: str | None = None,
    request: RunRequest | None = None,
    summaries: SummaryReport | None = None,
) -> RunSummary:
    """A whole run in this process (``drive_run`` with the in-process steps); ``summaries``:
    what writing the episodes' summaries before it cost."""
    return drive_run(
        db,
        settings,
        RunSteps(model, embedder, summaries),
        kind=kind,
        conversations=conversations,
        flow_run_id=flow_run_id,
        request=request,
    )
