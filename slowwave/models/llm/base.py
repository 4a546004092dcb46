"""The one interface every language-model runtime implements: structured generation.

A ``GenerationRequest`` is a prompt, the JSON schema its answer must match, and what it is for
(``Purpose``: consolidating a chunk, summarising episodes); ``generate`` answers a batch.
Runtimes return the model's raw text; parsing and validation happen once, in the calibrate
and guard stages, so every runtime is held to the same rules. One module per runtime:
``vllm_runtime`` (engines in Ray actors), ``openai`` (any OpenAI-compatible endpoint), ``replay``
(LoCoMo's gold facts).

Runtimes backed by a serving engine also stream (``StreamingModel``): each request is started
at once and its answer handed back as soon as it is done, so the scheduler can send a
conversation's next chunk while other conversations' answers are still being generated.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from slowwave.models import interrupt
from slowwave.models.llm.tokens import TokenCounter, estimate_tokens


class Purpose(StrEnum):
    """What a request is for: the same runtime serves both."""

    consolidate = "consolidate"  # a chunk's episodes against the known facts → actions
    summarize = "summarize"  # episodes without a summary → summaries
    merge = "merge"  # a chunk's gray-zone pairs → same fact or not, and the merged sentence
    change = "change"  # a chunk's unnamed updates → does the known fact still hold
    second_look = "second_look"  # a chunk's uncovered messages → the facts they state
    profile = "profile"  # a conversation's active facts → its profile


@dataclass(frozen=True)
class GenerationRequest:
    """One model call: a prompt and the schema of its answer."""

    chunk_id: str  # the chunk's (or the summary batch's) id; answers carry it back
    purpose: Purpose
    system: str
    user: str
    json_schema: dict[str, Any]
    # the most tokens this answer may take, below the runtime's own ``max_tokens``; None: the
    # runtime's. A short answer's cap (``answer_cap``) stops a model that repeats itself early
    max_tokens: int | None = None

    def answer_limit(self, runtime_max: int) -> int:
        """The completion tokens this request may take on a runtime whose cap is
        ``runtime_max``."""
        return runtime_max if self.max_tokens is None else min(self.max_tokens, runtime_max)


@dataclass(frozen=True)
class ModelAnswer:
    """A runtime's answer to one request: raw text, or why there is none."""

    chunk_id: str
    text: str | None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False  # cut off at max_tokens: ``text`` is what came before the cut
    # of ``prompt_tokens``, those the engine took from its prefix cache instead of computing
    # them (0 where the engine does not say: every billed token counts as computed)
    cached_tokens: int = 0
    # refusals (429, 503) the request met before this answer, and the seconds it waited them out
    refusals: int = 0
    waited_s: float = 0.0


def shares(answer: ModelAnswer, weights: Sequence[int]) -> list[ModelAnswer]:
    """``answer`` split between the parts of a request that several chunks shared, in
    proportion to ``weights`` (what each part showed): its tokens, refusals and waits, each
    count's parts adding up to the whole (largest remainders), so that the chunks' plans
    together bill the request once."""
    total = sum(weights)
    if total <= 0:
        raise ValueError("a shared answer needs a positive weight")

    def split(whole: int) -> list[int]:
        exact = [whole * w / total for w in weights]
        parts = [int(x) for x in exact]
        by_remainder = sorted(range(len(weights)), key=lambda i: parts[i] - exact[i])
        for i in by_remainder[: whole - sum(parts)]:
            parts[i] += 1
        return parts

    prompt, completion = split(answer.prompt_tokens), split(answer.completion_tokens)
    cached, refusals = split(answer.cached_tokens), split(answer.refusals)
    return [
        replace(
            answer,
            prompt_tokens=prompt[i],
            completion_tokens=completion[i],
            cached_tokens=cached[i],
            refusals=refusals[i],
            waited_s=answer.waited_s * w / total,
        )
        for i, w in enumerate(weights)
    ]


@runtime_checkable
class StructuredModel(Protocol):
    """Answers a batch of prompts (submitted together) with JSON matching their schemas."""

    name: str

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        """One answer per request, in order. Failures are answers with ``error`` set."""
        ...

    def close(self) -> None:
        """Release engines, actors, connections."""
        ...


@runtime_checkable
class BoundedModel(Protocol):
    """A runtime that knows its context window (prompt + answer) and counts tokens as its
    engine does: chunks are cut to fit it."""

    context_tokens: int

    def count_tokens(self, text: str, /) -> int: ...


def prompt_limits(model: object) -> tuple[int | None, TokenCounter]:
    """The runtime's context length and token counter; (None, the estimate) for a runtime
    with no context limit (the replay model, test doubles)."""
    if isinstance(model, BoundedModel):
        return model.context_tokens, model.count_tokens
    return None, estimate_tokens


@runtime_checkable
class StreamingModel(StructuredModel, Protocol):
    """A runtime that answers each request as soon as it is done, not the batch at once."""

    def submit(self, requests: Sequence[GenerationRequest]) -> list[Future[ModelAnswer]]:
        """Start every request now; one future per request, in order."""
        ...


def submit(
    model: StructuredModel, requests: Sequence[GenerationRequest]
) -> list[Future[ModelAnswer]]:
    """One future per request: streamed by a ``StreamingModel``, else the batch answered now.

    A runtime that fails as a whole fails every future with its exception.
    """
    if isinstance(model, StreamingModel):
        return model.submit(requests)
    futures: list[Future[ModelAnswer]] = [Future() for _ in requests]
    if not requests:
        return futures
    try:
        answers = {a.chunk_id: a for a in model.generate(requests)}
    except Exception as exc:
        for future in futures:
            future.set_exception(exc)
        return futures
    for request, future in zip(requests, futures, strict=True):
        answer = answers.get(request.chunk_id)
        future.set_result(
            answer or ModelAnswer(request.chunk_id, None, "runtime returned no answer for it")
        )
    return futures


def generate_watched(
    model: StructuredModel, requests: Sequence[GenerationRequest]
) -> list[ModelAnswer]:
    """One answer per request, in order, as ``generate`` gives them, waited for the way an
    interrupt can stop: within ``interrupt.POLL_S`` of an operator's interrupt the requests
    still in flight are cancelled and ``Interrupted`` is raised. A step's own requests (the
    second look, the change check, the gray zone) ask this way: they run on a shard's thread,
    where no ``KeyboardInterrupt`` arrives to end a plain wait."""
    futures = submit(model, requests)
    pending = set(futures)
    try:
        while pending:
            interrupt.check()
            pending = wait(pending, interrupt.POLL_S, FIRST_COMPLETED).not_done
    finally:
        for future in pending:  # interrupted, or a wait that raised: nobody reads them
            future.cancel()
    return [future.result() for future in futures]
