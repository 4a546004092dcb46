"""The schedule: every conversation an independent chain, all chains feeding the model.

A conversation's chunk k+1 is opened (predict sees the facts chunk k wrote) only after chunk
k is applied. Nothing else waits: the moment a chunk's answer is back and applied, that
conversation's next chunk is opened and submitted, while other conversations' requests are
still being generated. Measured against rounds (chunk k of every conversation together, the
next round after the whole round) on one vLLM engine, chains kept more requests running and
fewer waiting (``benchmarks/schedules.py``, README).

The stages still take many chunks at once: whatever answers are back together are parsed,
embedded and applied as one batch, and the conversations they free are opened as one batch.
A runtime that answers a whole batch at once (the replay model, test doubles) makes every
step a full wavefront, so the batch stages stay large.

``Backlog`` is consumed only as chunks are applied: when a stage raises (a dropped
connection), the caller may run the same backlog again and it goes on where it stopped.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from uuid import UUID

from slowwave.models import interrupt
from slowwave.models.chunk import ApplyResult, OpenChunk, PreparedChunk
from slowwave.models.episode import Episode
from slowwave.models.llm.base import ModelAnswer, StructuredModel, submit
from slowwave.models.run import RunSummary
from slowwave.tasks.claim import ConversationWork
from slowwave.tasks.transient import is_transient


@dataclass
class Backlog:
    """Each conversation's chunks not yet applied, oldest first."""

    queues: dict[str, deque[list[Episode]]] = field(default_factory=dict)

    @classmethod
    def of(cls, work: Sequence[ConversationWork]) -> Backlog:
        return cls({w.conversation_id: deque(w.chunks) for w in work if w.chunks})

    @property
    def chunks(self) -> int:
        return sum(len(q) for q in self.queues.values())


@dataclass(frozen=True)
class Stages:
    """The batch stages around the model call, bound to a database, embedder and run."""

    open: Callable[[Sequence[Sequence[Episode]]], list[OpenChunk]]
    finish: Callable[[Sequence[tuple[OpenChunk, ModelAnswer | None]]], list[PreparedChunk]]
    # applies, calling the second argument with each chunk's result as soon as it commits
    apply: Callable[[Sequence[PreparedChunk], Callable[[ApplyResult], None]], object]
    # of the conversations about to open a chunk, those over the run's token budget
    over_budget: Callable[[Sequence[str]], set[str]] = lambda conversations: set()


def _episodes(queue: Sequence[Sequence[Episode]], also: Sequence[UUID] = ()) -> set[UUID]:
    """The distinct episodes of queued chunks (parts of one episode count once)."""
    return {e.id for chunk in queue for e in chunk} | set(also)


def answer_of(model: StructuredModel, chunk_id: str, future: Future[ModelAnswer]) -> ModelAnswer:
    """The future's answer. A transient failure (engine unreachable, actor dead) is raised:
    the shard is retried and no chunk is charged an attempt. Any other exception fails this
    chunk only."""
    try:
        return future.result()
    except Exception as exc:
        if is_transient(exc):
            raise
        reason = f"model runtime {model.name} failed: {type(exc).__name__}: {exc}"
        return ModelAnswer(chunk_id, None, reason)


def run_chains(
    backlog: Backlog,
    summary: RunSummary,
    model: StructuredModel,
    stages: Stages,
    after_step: Callable[[int], None] | None = None,
) -> None:
    """Consolidate the backlog; ``after_step(n)`` after each step that finished ``n``
    conversations (nothing of theirs left in this run: applied, failed, or left for a later
    run behind a failed chunk).

    When a chunk fails and is not quarantined, the conversation's later chunks are left for a
    later run (their facts would depend on the failed chunk's). When the failure quarantines
    the chunk, its episodes are out of the way and the conversation goes on.
    """
    queues = backlog.queues
    ready = [c for c, q in queues.items() if q]
    waiting: dict[Future[ModelAnswer], OpenChunk] = {}
    finished = 0

    def settle(result: ApplyResult) -> None:
        """A chunk committed (or failed): its conversation's next chunk may be opened."""
        nonlocal finished
        queue = queues[result.conversation_id]
        queue.popleft()
        if result.forgotten:  # forgotten while in flight: nothing more of it, anywhere
            summary.episodes_forgotten += len(_episodes(queue, result.episode_ids))
            withdraw([result.conversation_id])
        elif result.conflict:  # another run holds the conversation now: the rest is theirs
            summary.episodes_conflicted += len(_episodes(queue, result.episode_ids))
            queue.clear()
        elif not result.applied and not result.quarantined:
            summary.episodes_deferred += len(_episodes(queue))
            queue.clear()
        elif result.quarantined:  # later parts of a quarantined episode go with it
            gone = set(result.episode_ids)
            kept = [c for c in queue if not gone.intersection(e.id for e in c)]
            queue.clear()
            queue.extend(kept)
        if queue:
            ready.append(result.conversation_id)
        else:
            del queues[result.conversation_id]
            finished += 1

    def withdraw(conversations: Sequence[str]) -> None:
        """Take conversations away from the work in flight (a forget takes one, an interrupt
        all): their queued chunks dropped, their model requests cancelled, nothing of theirs
        applied. Their episodes stay claimed until the run releases them."""
        gone = set(conversations)
        for conversation in gone:
            queues[conversation].clear()
        ready[:] = [c for c in ready if c not in gone]
        for future in [f for f, o in waiting.items() if o.plan.conversation_id in gone]:
            future.cancel()
            del waiting[future]

    def stop_if_interrupted() -> None:
        if interrupt.requested():
            withdraw(list(queues))
            raise interrupt.Interrupted()

    try:
        while ready or waiting:
            stop_if_interrupted()
            answered: list[tuple[OpenChunk, ModelAnswer | None]] = []
            spent = stages.over_budget(ready) if ready else set()
            for conversation in spent:  # left pending for a later run, with the reason
                summary.episodes_over_budget += len(_episodes(queues.pop(conversation)))
            ready = [c for c in ready if c not in spent]
            if spent and after_step is not None:
                after_step(len(spent))
            if ready:
                opened = stages.open([queues[c][0] for c in ready])
                ready = []
                answered += [(o, None) for o in opened if o.request is None]
                asking = [o for o in opened if o.request is not None]
                start = time.perf_counter()  # a batch runtime answers inside submit
                futures = submit(model, [o.request for o in asking if o.request is not None])
                waiting.update(zip(futures, asking, strict=True))
                summary.add_time("model", time.perf_counter() - start)
            start = time.perf_counter()
            if waiting and not answered:  # never waits on a model call past an interrupt
                while not wait(waiting, interrupt.POLL_S, FIRST_COMPLETED).done:
                    if interrupt.requested():
                        break
            summary.add_time("model", time.perf_counter() - start)
            stop_if_interrupted()  # an answer back and not applied is dropped with the rest
            for future in [f for f in waiting if f.done()]:
                item = waiting.pop(future)
                answered.append((item, answer_of(model, str(item.plan.chunk_id), future)))
            finished = 0
            try:
                stages.apply(stages.finish(answered), settle)
            finally:
                if after_step is not None:
                    after_step(finished)
    finally:
        for future in waiting:  # a stage raised: stop generating answers nobody will read
            future.cancel()
